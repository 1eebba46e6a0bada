// /metrics in Prometheus text format (prom-client): decisions by effect and rule, provider
// latency, ledger step latency, unknown outcomes, webhook outcomes and refusals, the operator's
// inbox. A registry per server, no global state.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { GateObserver } from "../gate/observer.js";
import { declaredToolName } from "../gate/tools.js";
import type { InboxCounts } from "../ledger/index.js";
import { within } from "../deadline.js";
import { delivery_turns } from "../ingest/turns.js";
import type { Provider, ProviderOutcome } from "../provider/port.js";
import type { RoutePlugin } from "./app.js";
import { entries_pages_in_flight_max, entriesPagesInFlight } from "./routes/log.js";

export interface Metrics {
  registry: Registry;
  observer: GateObserver;
  /** Wraps a provider so every call's latency and outcome is measured. */
  instrument(provider: Provider): Provider;
  routes: RoutePlugin;
  /** Counts observed calls that could not be recorded (each later reported by a system.evidence_gap entry). */
  evidenceGap(calls: number, reason: string): void;
  /** Where the inbox gauge reads its counts when scraped (the ledger's, once it is open). */
  watchInbox(read: () => Promise<InboxCounts>): void;
}

/** A scrape reads the inbox's counts from the database at most this often; scrapes between reuse them (or their failure). */
export const inbox_read_interval_ms = 1_000;
/** A scrape waits this long for them, then answers without the gauge: a database in trouble holds up no other series. */
export const inbox_read_timeout_ms = 1_000;

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "bursar_process_" });
  const decisions = new Counter({ name: "bursar_decisions_total", help: "Money-call decisions by tool, effect and rule", labelNames: ["tool", "effect", "rule"], registers: [registry] });
  const provider_seconds = new Histogram({
    name: "bursar_provider_request_seconds",
    help: "Provider request latency by operation and outcome",
    labelNames: ["operation", "outcome"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const ledger_seconds = new Histogram({
    name: "bursar_ledger_step_seconds",
    help: "Ledger steps of money calls by tool: decide (the decision, its hold and evidence, and its disk flush) and complete (the provider's answer recorded; an order's does not wait for its flush)",
    labelNames: ["tool", "step"],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  const wal_flush_seconds = new Histogram({
    name: "bursar_sqlite_wal_flush_seconds",
    help: "SQLite only: flushes of the WAL to disk (fdatasync on the thread pool), from start to done; one flush covers every commit made before it began",
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1],
    registers: [registry],
  });
  const unknown = new Counter({
    name: "bursar_unknown_outcomes_total",
    help: "Money calls (an agent's, or a HOLD the operator approved) answered with their provider outcome unknown; every hold the operator must settle, whatever made it unknown, is in bursar_inbox_items{list=\"unknown_outcomes\"}",
    labelNames: ["tool"],
    registers: [registry],
  });
  const webhooks = new Counter({ name: "bursar_webhooks_total", help: "Provider webhooks by outcome", labelNames: ["outcome"], registers: [registry] });
  const webhooks_rejected = new Counter({
    name: "bursar_webhooks_rejected_total",
    help: "Webhook deliveries answered with an error, by HTTP status (401 signature, 400 event id or body, 413 too large, 415 content coding, 503 no webhook secret, busy, or deferred as bursar_webhooks_total counts it)",
    labelNames: ["status"],
    registers: [registry],
  });
  const lookups_limited = new Counter({
    name: "bursar_lookups_limited_total",
    help: "fetch_order, fetch_payment and fetch_order_payments calls answered rate_limited (BURSAR_LOOKUPS_PER_MINUTE) instead of asking the provider",
    labelNames: ["tool"],
    registers: [registry],
  });

  // The process's bounds on work that held the event loop for every request (a hostile review):
  // how close they are, read when scraped. Past them a request is answered 503 busy.
  new Gauge({
    name: "bursar_ingest_deliveries",
    help: `Evidence deliveries being stored (at most ${delivery_turns.in_progress_max}) or waiting their turn (at most ${delivery_turns.waiting_max}; past them 503 busy), by state`,
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const gauge = delivery_turns.gauge();
      this.set({ state: "in_progress" }, gauge.in_progress);
      this.set({ state: "waiting" }, gauge.waiting);
    },
  });
  new Gauge({
    name: "bursar_log_pages_in_flight",
    help: `Pages of log entries being answered (at most ${entries_pages_in_flight_max}; past them 503 busy)`,
    registers: [registry],
    collect() {
      this.set(entriesPagesInFlight());
    },
  });

  // What needs the operator, counted as GET /api/v1/inbox counts it: a gauge that cannot drift
  // from the inbox, whatever made an item (a crash's lease run out, an approved order's timeout).
  let readInbox: (() => Promise<InboxCounts>) | undefined;
  let inbox_read: { at_ms: number; counts: Promise<InboxCounts | undefined> } | undefined;
  new Gauge({
    name: "bursar_inbox_items",
    help: "Items in the operator's inbox (GET /api/v1/inbox), by list: pending_approvals, unknown_outcomes (holds whose provider outcome is unknown), frozen_blocks",
    labelNames: ["list"],
    registers: [registry],
    async collect() {
      if (!readInbox) return;
      const now_ms = performance.now();
      if (!inbox_read || now_ms - inbox_read.at_ms >= inbox_read_interval_ms) {
        // Failed or late: no figure rather than a stale one (its absence is what to alert on;
        // /healthz and the log say what the database did).
        inbox_read = { at_ms: now_ms, counts: within(readInbox(), inbox_read_timeout_ms).catch(() => undefined) };
      }
      const counts = await inbox_read.counts;
      if (!counts) return this.reset();
      for (const [list, count] of Object.entries(counts)) this.set({ list }, count);
    },
  });

  const evidence_gap = new Counter({ name: "bursar_evidence_gap_calls_total", help: "Observed calls that could not be recorded, by reason", labelNames: ["reason"], registers: [registry] });
  const evidenceGap = (calls: number, reason: string) => evidence_gap.inc({ reason }, calls);

  const observer: GateObserver = {
    decision: (tool, verdict) => decisions.inc({ tool: declaredToolName(tool), effect: verdict.effect, rule: verdict.rule }),
    providerCall: (operation, outcome, seconds) => provider_seconds.observe({ operation, outcome }, seconds),
    unknownOutcome: (tool) => unknown.inc({ tool }),
    webhook: (outcome) => webhooks.inc({ outcome }),
    webhookRejected: (status) => webhooks_rejected.inc({ status: String(status) }),
    lookupLimited: (tool) => lookups_limited.inc({ tool }),
    ledgerStep: (tool, step, seconds) => ledger_seconds.observe({ tool, step }, seconds),
    walFlush: (seconds) => wal_flush_seconds.observe(seconds),
  };

  function timed<A extends unknown[], T>(operation: string, call: (...args: A) => Promise<ProviderOutcome<T>>) {
    return async (...args: A): Promise<ProviderOutcome<T>> => {
      const start = process.hrtime.bigint();
      const outcome = await call(...args);
      observer.providerCall(operation, outcome.kind, Number(process.hrtime.bigint() - start) / 1e9);
      return outcome;
    };
  }

  const instrument = (provider: Provider): Provider => ({
    name: provider.name,
    createOrder: timed("create_order", (input) => provider.createOrder(input)),
    capturePayment: timed("capture_payment", (id, input) => provider.capturePayment(id, input)),
    fetchOrder: timed("fetch_order", (id) => provider.fetchOrder(id)),
    fetchPayment: timed("fetch_payment", (id) => provider.fetchPayment(id)),
    fetchOrderPayments: timed("fetch_order_payments", (id) => provider.fetchOrderPayments(id)),
    findOrdersByReceipt: timed("find_orders_by_receipt", (receipt) => provider.findOrdersByReceipt(receipt)),
    verifyWebhook: (raw, signature) => provider.verifyWebhook(raw, signature),
    parseWebhook: (raw) => provider.parseWebhook(raw),
  });

  const routes: RoutePlugin = (app) => {
    app.get("/metrics", async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  };
  const watchInbox = (read: () => Promise<InboxCounts>) => {
    readInbox = read;
    inbox_read = undefined;
  };
  return { registry, observer, instrument, routes, evidenceGap, watchInbox };
}
