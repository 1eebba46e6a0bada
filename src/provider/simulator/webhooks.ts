// The simulator's webhook outbox: every event is signed once (X-Razorpay-Signature over the exact
// bytes sent), kept in an outbox tests can read, and POSTed to the webhook URL one at a time with
// bounded retries and backoff. Webhook fault knobs (duplicate, out of order, late, drop) act here.

import { performance } from "node:perf_hooks";
import { deadline } from "../../deadline.js";
import { event_id_header_name, signature_header_name, signWebhookBody } from "../razorpay/webhook.js";
import type { WebhookFaults } from "./faults.js";

export const webhook_attempts_max = 5;
export const webhook_retry_base_ms_default = 1_000;
export const webhook_retry_max_ms = 30_000;
export const webhook_request_timeout_ms = 5_000;
/** A held (out-of-order) event goes out by itself after this long if no later event overtakes it. */
export const webhook_hold_max_ms = 10_000;
/** Oldest finished entries are forgotten beyond this; unfinished ones are never dropped silently. */
export const outbox_entries_max = 10_000;

export type OutboxState = "pending" | "held" | "delivering" | "delivered" | "failed" | "dropped";

export interface OutboxAttempt {
  at: string;
  status: number | null;
  error?: string;
}

export interface OutboxEntry {
  seq: number;
  event_id: string;
  event: string;
  /** The exact bytes sent; the signature is over these. */
  body: string;
  signature: string;
  state: OutboxState;
  attempts: OutboxAttempt[];
  /** How many successful deliveries this entry wants: 2 when the duplicate knob struck. */
  copies: number;
  delivered_count: number;
  /** Monotonic ms (performance.now) before which no attempt is made. */
  not_before_ms: number;
}

export interface DeliverySummary {
  attempted: number;
  delivered: number;
  failed: number;
}

export interface OutboxOptions {
  secret: string;
  url: string | undefined;
  auto_deliver: boolean;
  retry_base_ms: number;
  now_iso: () => string;
  fetch: typeof globalThis.fetch;
}

export class WebhookOutbox {
  private readonly entries: OutboxEntry[] = [];
  private seq = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  /** A background pump is queued and has not begun: it will send whatever is due when it does. */
  private pump_queued = false;
  private closed = false;
  private readonly abort = new AbortController();
  private url: string | undefined;

  constructor(private readonly options: OutboxOptions) {
    this.url = options.url;
  }

  setUrl(url: string | undefined): void {
    this.url = url;
    this.schedule();
  }

  enqueue(event_id: string, event: string, body: string, faults: WebhookFaults): OutboxEntry {
    const now = performance.now();
    const entry: OutboxEntry = {
      seq: ++this.seq,
      event_id,
      event,
      body,
      signature: signWebhookBody(this.options.secret, body),
      state: faults.drop ? "dropped" : faults.out_of_order ? "held" : "pending",
      attempts: [],
      copies: faults.duplicate ? 2 : 1,
      delivered_count: 0,
      not_before_ms: now + (faults.out_of_order ? webhook_hold_max_ms : faults.late_ms),
    };
    this.entries.push(entry);
    this.trim();
    this.schedule();
    return entry;
  }

  /** Sends an existing event again, under its own event id or a new one (Razorpay does both). */
  redeliver(event_id: string, new_event_id: string | undefined): OutboxEntry | undefined {
    const original = this.entries.find((entry) => entry.event_id === event_id);
    if (!original) return undefined;
    const none: WebhookFaults = { drop: false, duplicate: false, out_of_order: false, late_ms: 0 };
    return this.enqueue(new_event_id ?? original.event_id, original.event, original.body, none);
  }

  list(): OutboxEntry[] {
    return this.entries.map((entry) => ({ ...entry, attempts: entry.attempts.map((attempt) => ({ ...attempt })) }));
  }

  /** One attempt for every pending and held event now, ignoring backoff and delays; held ones last. */
  deliverNow(): Promise<DeliverySummary> {
    return this.serialize(async () => {
      const summary: DeliverySummary = { attempted: 0, delivered: 0, failed: 0 };
      if (!this.url) return summary;
      for (const state of ["pending", "held"] as const) {
        for (const entry of this.entries.filter((candidate) => candidate.state === state)) {
          if (entry.state !== state) continue; // released or delivered meanwhile
          await this.attemptAllCopies(entry, summary);
        }
      }
      return summary;
    });
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private trim(): void {
    while (this.entries.length > outbox_entries_max) {
      const index = this.entries.findIndex((entry) => ["delivered", "failed", "dropped"].includes(entry.state));
      if (index < 0) return;
      this.entries.splice(index, 1);
    }
  }

  private nextDue(now: number): OutboxEntry | undefined {
    return this.entries.find((entry) => (entry.state === "pending" || entry.state === "held") && entry.not_before_ms <= now);
  }

  private earliestWaiting(): number | undefined {
    const waiting = this.entries.filter((entry) => entry.state === "pending" || entry.state === "held");
    return waiting.length === 0 ? undefined : Math.min(...waiting.map((entry) => entry.not_before_ms));
  }

  /** Background delivery: a timer for the earliest waiting event, then one serialized pump. */
  private schedule(): void {
    if (this.closed || !this.options.auto_deliver || !this.url) return;
    if (this.timer) clearTimeout(this.timer);
    const earliest = this.earliestWaiting();
    if (earliest === undefined) return;
    const wait_ms = Math.max(0, Math.ceil(earliest - performance.now()));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // One pump waiting is enough: each event enqueued while a pump ran queued another behind
      // it, a backlog (and as many passes) growing for as long as events came faster than it.
      if (this.pump_queued) return;
      this.pump_queued = true;
      void this.serialize(() => {
        this.pump_queued = false;
        return this.pump();
      }).then(() => this.schedule());
    }, wait_ms);
    this.timer.unref();
  }

  private async pump(): Promise<void> {
    for (let steps = 0; steps < outbox_entries_max && !this.closed; steps++) {
      const entry = this.nextDue(performance.now());
      if (!entry) return;
      await this.attemptAllCopies(entry, { attempted: 0, delivered: 0, failed: 0 });
    }
  }

  private async attemptAllCopies(entry: OutboxEntry, summary: DeliverySummary): Promise<void> {
    // A duplicated event goes out again right after its first successful delivery.
    let succeeded = await this.attempt(entry, summary);
    while (succeeded && entry.state === "pending" && !this.closed) succeeded = await this.attempt(entry, summary);
  }

  private async attempt(entry: OutboxEntry, summary: DeliverySummary): Promise<boolean> {
    const url = this.url;
    if (!url || this.closed) return false;
    entry.state = "delivering";
    summary.attempted += 1;
    const result = await this.post(url, entry);
    entry.attempts.push({ at: this.options.now_iso(), ...result });
    const succeeded = result.status !== null && result.status >= 200 && result.status < 300;
    if (succeeded) {
      this.markDelivered(entry, summary);
      return true;
    }
    if (entry.attempts.length >= webhook_attempts_max) {
      entry.state = "failed";
      summary.failed += 1;
      return false;
    }
    const backoff_ms = Math.min(this.options.retry_base_ms * 2 ** (entry.attempts.length - 1), webhook_retry_max_ms);
    entry.state = "pending";
    entry.not_before_ms = performance.now() + backoff_ms;
    return false;
  }

  private markDelivered(entry: OutboxEntry, summary: DeliverySummary): void {
    entry.delivered_count += 1;
    entry.state = entry.delivered_count < entry.copies ? "pending" : "delivered";
    if (entry.state === "delivered") summary.delivered += 1;
    // Out of order: events held back are released only once a later one has gone out.
    for (const held of this.entries) {
      if (held.state === "held" && held.seq < entry.seq) {
        held.state = "pending";
        held.not_before_ms = performance.now();
      }
    }
  }

  private async post(url: string, entry: OutboxEntry): Promise<{ status: number | null; error?: string }> {
    const limit = deadline(webhook_request_timeout_ms, `no answer within ${webhook_request_timeout_ms} ms`, this.abort.signal);
    try {
      const response = await this.options.fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          [signature_header_name]: entry.signature,
          [event_id_header_name]: entry.event_id,
          "user-agent": "Razorpay-Webhook/v1 (bursar-simulator)",
        },
        body: entry.body,
        redirect: "manual",
        signal: limit.signal,
      });
      await response.body?.cancel();
      return { status: response.status };
    } catch (error) {
      return { status: null, error: error instanceof Error ? error.message : String(error) };
    } finally {
      limit.release();
    }
  }
}
