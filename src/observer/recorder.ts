// Off the critical path: observed calls wait in a bounded queue and are appended in batches.
// When the queue is full or the store fails, calls go unrecorded but never silently: the
// next successful write starts with a `system.evidence_gap` entry saying how many and when.

import type { Clock } from "../clock.js";
import { CanonicalJsonError, EvidenceInputError, readTreeSize, type AppendInput, type EvidenceLog } from "../evidence/index.js";
import { CommitOutcomeUnknownError, type SqlDriver } from "../ledger/driver.js";
import type { ObserverRuns, RunMark } from "./runs.js";

export const queue_length_max_default = 10_000;
/** Entries are capped (args and results over 64 KiB are kept by hash only) and an observed call's
 *  are held as text until written, so this bounds memory too. */
export const queue_bytes_max = 64 * 1_048_576;
export const batch_entries_max = 500;
/** A batch takes entries up to this many counted bytes (at least one entry): a deferred entry's
 *  values are parsed only for its batch, and parsed JSON takes many times its text's bytes. */
export const batch_bytes_max = 4 * 1_048_576;
export const retry_delay_ms_default = 1_000;
/** Observed calls wait this long to be written together: with SQLite every commit is an fsync
 *  on the event loop, so fewer, larger transactions keep the relay's latency flat. */
export const flush_delay_ms_default = 100;
export const close_drain_ms_max = 2_000;

/** An entry built only when its batch is written, so that while queued it holds what it chooses
 *  (an observed call: its args and result as text, not parsed). Building is pure: a refused batch
 *  builds its entries again, one by one. */
export interface DeferredInput {
  build(): AppendInput;
}

/** With a batch: how many calls its entries write down, and how many the observer has taken in (read when asked). */
export interface CallCounts {
  written: number;
  taken: () => number;
}

/** What an append of unknown outcome wrote last, as its transaction saw it: the sink's to look for. */
export interface AppendMark {
  seq: number;
  leaf_hash: string;
  run?: RunMark | undefined;
}

/** An append whose COMMIT may or may not have taken effect (the connection broke during it). */
export class AppendOutcomeUnknownError extends Error {
  override name = "AppendOutcomeUnknownError";
  constructor(
    message: string,
    readonly mark: AppendMark,
  ) {
    super(message);
  }
}

/** Where observed evidence goes: one append of several entries, atomically. */
export interface EvidenceSink {
  append(inputs: readonly AppendInput[], counts: CallCounts): Promise<void>;
  /**
   * Whether the append that threw AppendOutcomeUnknownError with `mark` took effect: asked before
   * anything else is appended, so a batch that did is not written twice. Throws while the store
   * cannot tell. A sink that throws that error has this too.
   */
  tookEffect?(mark: AppendMark): Promise<boolean>;
}

/** The evidence log, and with `runs` the run's counts in the same transaction as the entries. */
export function logSink(driver: SqlDriver, log: EvidenceLog, runs?: ObserverRuns): EvidenceSink {
  return {
    append: async (inputs, counts) => {
      let written: AppendMark | undefined;
      try {
        const mark = await driver.transaction(async (tx) => {
          // The run's row first: findLost locks it before the log too.
          const mark = await runs?.written(tx, counts.written, counts.taken);
          // Observed calls have no caller waiting for a receipt: checkpoints cover their entries.
          const last = (await log.appendMany(tx, inputs, { receipts: false, last: true })).at(-1);
          written = last && { seq: last.seq, leaf_hash: last.leaf_hash, run: mark };
          return mark;
        });
        if (runs && mark) runs.stored(mark);
      } catch (error) {
        if (!(error instanceof CommitOutcomeUnknownError) || !written) throw error;
        throw new AppendOutcomeUnknownError(error.message, written);
      }
    },
    // The entry's seq holds its leaf hash (seq and time are in it) only if that COMMIT took effect.
    // Read under the log's sequence lock: a COMMIT the database is still carrying out (ours timed
    // out waiting) holds that lock until it ends, and a plain read would not yet see its rows.
    tookEffect: async ({ seq, leaf_hash, run }) => {
      const stored = await driver.transaction(async (tx) => {
        await readTreeSize(tx, true);
        return tx.get<{ leaf_hash: string }>("SELECT leaf_hash FROM log_entries WHERE seq = ?", [seq]);
      });
      if (stored?.leaf_hash !== leaf_hash) return false;
      if (runs && run) runs.stored(run);
      return true;
    },
  };
}

export type GapReason = "queue_full" | "store_unavailable" | "unrecordable" | "too_large" | "unparsed" | "keys_written_twice";

export interface RecorderOptions {
  sink: EvidenceSink;
  clock: Clock;
  queue_length_max?: number;
  retry_delay_ms?: number;
  flush_delay_ms?: number;
  /** Calls taken in but not yet handed to the recorder (awaiting their answers): counted as taken. */
  pendingCalls?: () => number;
  /** Called with the number of calls that just became unrecorded (the /metrics counter). */
  onUnrecorded?: (calls: number, reason: GapReason) => void;
  /** Operational log line; never given a header, args or a result. */
  onError?: (message: string) => void;
}

interface QueuedCall {
  input: DeferredInput;
  bytes: number;
  source_id: string;
}

class Gap {
  calls = 0;
  first_at = "";
  last_at = "";
  readonly reasons = new Set<GapReason>();
  readonly by_source = new Map<string, number>();

  add(calls: number, reason: GapReason, source_id: string, at: string): void {
    if (this.calls === 0) this.first_at = at;
    this.calls += calls;
    this.last_at = at;
    this.reasons.add(reason);
    this.by_source.set(source_id, (this.by_source.get(source_id) ?? 0) + calls);
  }

  /** Folds a later gap into this one. */
  merge(later: Gap): void {
    if (later.calls === 0) return;
    if (this.calls === 0) this.first_at = later.first_at;
    this.calls += later.calls;
    this.last_at = later.last_at;
    for (const reason of later.reasons) this.reasons.add(reason);
    for (const [source_id, calls] of later.by_source) this.by_source.set(source_id, (this.by_source.get(source_id) ?? 0) + calls);
  }

  entry(recorded_at: string): AppendInput {
    const body = {
      unrecorded_calls: this.calls,
      first_missed_at: this.first_at,
      last_missed_at: this.last_at,
      reasons: [...this.reasons].sort(),
      // A list, not an object keyed by source id: the log scrubs a value whose key looks like a
      // secret's name, and a random id can ("src_vcX…" holds "cvc"), which redacted its count.
      by_source: [...this.by_source].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([source_id, calls]) => ({ source_id, calls })),
      written_at: recorded_at,
    };
    return { kind: "system.evidence_gap", source: "observer", body };
  }
}

export class Recorder {
  private readonly queue: QueuedCall[] = [];
  private queued_bytes = 0;
  /** Calls handed to the recorder: queued, or counted in a gap. Each is written once, as an
   *  observer.call entry or in a system.evidence_gap entry's count, unless the process stops first. */
  private calls_handed = 0;
  private gap = new Gap();
  /** A batch whose append's outcome is unknown: its calls still lead the queue, and its gap is
   *  held here until the sink says whether it was written. */
  private unresolved: { calls: number; gap: Gap | null; mark: AppendMark } | null = null;
  private flushing: Promise<void> | null = null;
  private closed = false;
  /** Callers waiting in drain(): while any waits, batches are written back to back. */
  private draining = 0;
  private retry_timer: NodeJS.Timeout | null = null;
  private readonly queue_length_max: number;
  private readonly retry_delay_ms: number;
  private readonly flush_delay_ms: number;

  constructor(private readonly options: RecorderOptions) {
    this.queue_length_max = options.queue_length_max ?? queue_length_max_default;
    this.retry_delay_ms = options.retry_delay_ms ?? retry_delay_ms_default;
    this.flush_delay_ms = options.flush_delay_ms ?? flush_delay_ms_default;
  }

  /** Never throws and never waits: the proxied call has already been answered. */
  enqueue(input: DeferredInput, bytes: number, source_id: string): void {
    this.calls_handed += 1;
    const full = this.queue.length >= this.queue_length_max || this.queued_bytes + bytes > queue_bytes_max;
    if (this.closed || full) return this.countGap(1, "queue_full", source_id);
    this.queue.push({ input, bytes, source_id });
    this.queued_bytes += bytes;
    this.schedule();
  }

  /** Counts calls that could not even be queued (e.g. a body too large to inspect). */
  unrecorded(calls: number, reason: GapReason, source_id: string): void {
    this.calls_handed += calls;
    this.countGap(calls, reason, source_id);
  }

  /** Calls taken in so far: handed over, or still awaiting their answers. */
  get taken(): number {
    return this.calls_handed + (this.options.pendingCalls?.() ?? 0);
  }

  /** Whether every call handed over is written (or its count is): what a clean stop needs. */
  get drained(): boolean {
    return this.queue.length === 0 && this.gap.calls === 0 && this.unresolved === null;
  }

  /** A call handed over that goes in the next gap entry rather than an entry of its own. */
  private countGap(calls: number, reason: GapReason, source_id: string): void {
    this.gap.add(calls, reason, source_id, this.options.clock().toISOString());
    this.options.onUnrecorded?.(calls, reason);
    this.schedule();
  }

  get pending(): number {
    return this.queue.length;
  }

  /** What the queued calls are counted as against queue_bytes_max. */
  get pending_bytes(): number {
    return this.queued_bytes;
  }

  get unrecorded_pending(): number {
    return this.gap.calls + (this.unresolved?.gap?.calls ?? 0);
  }

  private schedule(): void {
    if (this.flushing || this.retry_timer || this.closed) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = null;
    });
  }

  /** Each batch waits flush_delay_ms for the calls after it, unless a whole batch (by entries or
   *  bytes) is queued or a drain waits: under steady load, a batch written as soon as the last had
   *  committed took only the few milliseconds' calls that came meanwhile. */
  private async flush(): Promise<void> {
    while (!this.closed && (this.queue.length > 0 || this.gap.calls > 0 || this.unresolved)) {
      const full = this.queue.length >= batch_entries_max || this.queued_bytes >= batch_bytes_max;
      if (!full && this.draining === 0) await sleep(this.flush_delay_ms);
      if (this.closed) return;
      const written = await this.writeBatch();
      if (!written) return this.retryLater();
    }
  }

  /** One transaction: the gap entry (if any) first, then up to a batch of calls. */
  private async writeBatch(): Promise<boolean> {
    if (!(await this.resolveUnknown())) return false;
    if (this.queue.length === 0 && this.gap.calls === 0) return true;
    const batch = this.nextBatch(batch_entries_max - (this.gap.calls > 0 ? 1 : 0));
    switch (await this.append(batch)) {
      case "written":
        this.dequeue(batch.length);
        return true;
      case "store_failed":
        return false;
      case "refused":
        return this.writeEach(batch);
    }
  }

  /**
   * After an append whose outcome was unknown: asks the sink whether it took effect. If it did,
   * its calls leave the queue and its gap is done with; if not, they are written again. False
   * while the store cannot tell (nothing is written meanwhile, so nothing is written twice).
   */
  private async resolveUnknown(): Promise<boolean> {
    const unresolved = this.unresolved;
    if (!unresolved) return true;
    let took_effect: boolean;
    try {
      took_effect = (await this.options.sink.tookEffect?.(unresolved.mark)) ?? false;
    } catch (error) {
      this.options.onError?.(`observer evidence store unavailable, retrying: ${error instanceof Error ? error.message : String(error)}`);
      return false;
    }
    this.unresolved = null;
    if (took_effect) this.dequeue(unresolved.calls);
    else if (unresolved.gap) {
      unresolved.gap.merge(this.gap);
      this.gap = unresolved.gap;
    }
    return true;
  }

  /** The queue's first calls: at most `entries_max`, and past the first, at most batch_bytes_max counted bytes. */
  private nextBatch(entries_max: number): QueuedCall[] {
    let bytes = 0;
    let count = 0;
    for (const call of this.queue) {
      if (count === entries_max || (count > 0 && bytes + call.bytes > batch_bytes_max)) break;
      bytes += call.bytes;
      count += 1;
    }
    return this.queue.slice(0, count);
  }

  /**
   * Appends the gap entry (if any) and `calls` atomically. "refused": the log cannot record one
   * of the entries (a bug in what was queued), so retrying the same batch would never succeed.
   */
  private async append(calls: readonly QueuedCall[]): Promise<"written" | "refused" | "store_failed"> {
    const gap = this.gap.calls > 0 ? this.gap : null;
    const inputs = [...(gap ? [gap.entry(this.options.clock().toISOString())] : []), ...calls.map((call) => call.input.build())];
    if (gap) this.gap = new Gap();
    try {
      await this.options.sink.append(inputs, { written: calls.length + (gap?.calls ?? 0), taken: () => this.taken });
      return "written";
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof AppendOutcomeUnknownError) {
        this.unresolved = { calls: calls.length, gap, mark: error.mark };
        this.options.onError?.(`observer evidence store unavailable, retrying once it says whether the last batch was written: ${message}`);
        return "store_failed";
      }
      if (gap) {
        gap.merge(this.gap);
        this.gap = gap;
      }
      if (error instanceof EvidenceInputError || error instanceof CanonicalJsonError) {
        this.options.onError?.(`observer evidence refused (calls: ${calls.length}${gap ? ", with the gap entry" : ""}): ${message}`);
        return "refused";
      }
      this.options.onError?.(`observer evidence store unavailable, retrying: ${message}`);
      return "store_failed";
    }
  }

  private dequeue(count: number): void {
    for (const call of this.queue.splice(0, count)) this.queued_bytes -= call.bytes;
  }

  /**
   * After a batch was refused: the gap entry alone, then each call alone, so only the calls the
   * log cannot record are dropped (and counted in the next gap entry). A store failure on the way
   * stops here; the rest stays queued for the retry.
   */
  private async writeEach(batch: readonly QueuedCall[]): Promise<boolean> {
    if (this.gap.calls > 0) {
      const gap_written = await this.append([]);
      if (gap_written === "store_failed") return false;
      // The gap entry is built here from counts and times: the log refusing it is a bug. Its
      // calls were counted in the metrics already; dropping it keeps the calls after it flowing.
      if (gap_written === "refused") this.gap = new Gap();
    }
    for (const call of batch) {
      const written = await this.append([call]);
      if (written === "store_failed") return false;
      this.dequeue(1);
      if (written === "refused") this.countGap(1, "unrecordable", call.source_id);
    }
    return true;
  }

  private retryLater(): void {
    if (this.closed) return;
    this.retry_timer = setTimeout(() => {
      this.retry_timer = null;
      this.schedule();
    }, this.retry_delay_ms);
    this.retry_timer.unref();
  }

  /**
   * Waits until the queue is empty and nothing is unrecorded-but-unreported, or `timeout_ms` passes.
   * Its waits keep the process alive (the flush's own do not): at shutdown nothing else may be
   * left to, and the process would exit with the queue unwritten.
   */
  async drain(timeout_ms = close_drain_ms_max): Promise<boolean> {
    const deadline = Date.now() + timeout_ms;
    this.draining += 1;
    try {
      while (!this.drained || this.flushing) {
        if (Date.now() >= deadline) return false;
        if (this.flushing) await Promise.race([this.flushing, sleep(10, true)]);
        else await sleep(10, true);
      }
      return true;
    } finally {
      this.draining -= 1;
    }
  }

  /** Stops accepting; gives the queue a bounded moment to drain; what remains is reported. */
  async close(): Promise<void> {
    const drained = await this.drain(close_drain_ms_max);
    this.closed = true;
    if (this.retry_timer) clearTimeout(this.retry_timer);
    if (!drained) {
      const unknown = this.unresolved ? ` (the first ${this.unresolved.calls} of them in a batch that may have been written: its COMMIT's outcome is unknown)` : "";
      this.options.onError?.(`observer closing with ${this.queue.length} calls unwritten${unknown} and ${this.unrecorded_pending} unrecorded`);
    }
  }
}

function sleep(ms: number, keep_alive = false): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    if (!keep_alive) timer.unref();
  });
}
