// A Razorpay-wire-compatible simulator Bursar ships: orders, payments, capture, a test checkout,
// signed webhooks with retries, and fault knobs. A fastify plugin, mounted under any prefix.

import { createHash, timingSafeEqual } from "node:crypto";
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { systemClock, type Clock } from "../../clock.js";
import { FaultState, type FaultControls } from "./faults.js";
import { registerSimulatorRoutes, type RouteContext } from "./routes.js";
import { randomBase62Id, SimStore, wireOrder, wirePayment, type Emit } from "./store.js";
import { WebhookOutbox, webhook_retry_base_ms_default, type DeliverySummary, type OutboxEntry } from "./webhooks.js";

export { simulator_api_routes, fault_defaults, type FaultControls, type FaultSettings, type FaultSettingsPatch } from "./faults.js";
export { test_card_success, test_card_declined } from "./routes.js";
export {
  webhook_attempts_max,
  webhook_retry_base_ms_default,
  type OutboxEntry,
  type DeliverySummary,
} from "./webhooks.js";

export const simulator_account_id_default = "acc_BursarSimulator";

export interface SimulatorOptions {
  /** Where webhooks go; may be set later with `setWebhookUrl` (e.g. once the port is known). */
  webhook_url?: string;
  webhook_secret: string;
  clock?: Clock;
  /** Base62 id suffixes (order_, pay_, evt_ are prefixed). Deterministic in tests; random by default. */
  ids?: () => string;
  /** Default: any rzp_test_ key id with a non-empty secret. */
  accept_key?: (key_id: string, key_secret: string) => boolean;
  /** Background delivery of webhooks (default true); false leaves them for `deliverWebhooksNow()`. */
  auto_deliver?: boolean;
  /** First retry delay; doubles per attempt up to 30 s, at most 5 attempts. */
  webhook_retry_base_ms?: number;
  /** Registers the /sim/faults, /sim/webhooks, /sim/payments/{id}/expire and /sim/payments/{id}/refund control routes (default true). */
  control_routes?: boolean;
  account_id?: string;
  fetch?: typeof globalThis.fetch;
}

/** Read-only views for tests: copies in Razorpay's wire shape. */
export interface SimulatorState {
  orders(): Record<string, unknown>[];
  order(order_id: string): Record<string, unknown> | undefined;
  payments(): Record<string, unknown>[];
  payment(payment_id: string): Record<string, unknown> | undefined;
  outbox(): OutboxEntry[];
  /** Requests that reached a /v1 route (proves a locally refused call sent nothing). */
  apiRequests(): number;
}

export type SimulatorPlugin = (app: FastifyInstance, options?: unknown) => Promise<void>;

export interface Simulator {
  /** A fastify plugin: `app.register(simulator.plugin, { prefix: "/simulator" })`, or no prefix for `/`. */
  plugin: SimulatorPlugin;
  faults: FaultControls;
  state: SimulatorState;
  setWebhookUrl(url: string | undefined): void;
  /** One attempt now for every pending and held event, ignoring backoff and delays. */
  deliverWebhooksNow(): Promise<DeliverySummary>;
  /** Re-sends an event's exact bytes, under its own event id or (new_event_id) a fresh one. */
  redeliverWebhook(event_id: string, options?: { new_event_id?: boolean }): OutboxEntry | undefined;
  /** Stops delivery and cuts hung requests. Call before closing the server it is mounted on. */
  close(): Promise<void>;
}

const defaultAcceptKey = (key_id: string, key_secret: string) => key_id.startsWith("rzp_test_") && key_secret.length > 0;

/**
 * An `accept_key` for exactly one key, as the mounted simulator uses with the key Bursar made for
 * itself: the id compared plainly, the secret in constant time (as SHA-256 digests, so neither
 * its bytes nor its length leak through timing).
 */
export function acceptOnlyKey(key_id: string, key_secret: string): (key_id: string, key_secret: string) => boolean {
  const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();
  const expected = digest(key_secret);
  return (given_id, given_secret) => {
    const secret_matches = timingSafeEqual(digest(given_secret), expected);
    return secret_matches && given_id === key_id;
  };
}

function buildEmit(outbox: WebhookOutbox, faults: FaultState, clock: Clock, new_event_id: () => string, account_id: string): Emit {
  return (event, payment, order) => {
    const payload: Record<string, unknown> = { payment: { entity: wirePayment(payment) } };
    if (order) payload.order = { entity: wireOrder(order) };
    const body = JSON.stringify({
      entity: "event",
      account_id,
      event,
      contains: order ? ["payment", "order"] : ["payment"],
      payload,
      created_at: Math.floor(clock().getTime() / 1000),
    });
    outbox.enqueue(new_event_id(), event, body, faults.takeWebhookFaults());
  };
}

function buildState(store: SimStore, outbox: WebhookOutbox, counters: { api_requests: number }): SimulatorState {
  return {
    orders: () => [...store.orders.values()].map(wireOrder),
    order: (order_id) => {
      const order = store.orders.get(order_id);
      return order ? wireOrder(order) : undefined;
    },
    payments: () => [...store.payments.values()].map(wirePayment),
    payment: (payment_id) => {
      const payment = store.payments.get(payment_id);
      return payment ? wirePayment(payment) : undefined;
    },
    outbox: () => outbox.list(),
    apiRequests: () => counters.api_requests,
  };
}

export function createSimulator(options: SimulatorOptions): Simulator {
  if (!options.webhook_secret) throw new Error("createSimulator: webhook_secret is required to sign webhooks");
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? randomBase62Id;
  const new_event_id = () => `evt_${ids()}`;
  const faults = new FaultState();
  const outbox = new WebhookOutbox({
    secret: options.webhook_secret,
    url: options.webhook_url,
    auto_deliver: options.auto_deliver ?? true,
    retry_base_ms: options.webhook_retry_base_ms ?? webhook_retry_base_ms_default,
    now_iso: () => clock().toISOString(),
    fetch: options.fetch ?? globalThis.fetch,
  });
  const emit = buildEmit(outbox, faults, clock, new_event_id, options.account_id ?? simulator_account_id_default);
  const store = new SimStore(clock, ids, emit);
  const abort = new AbortController();
  const hung_sockets = new Set<Socket>();
  const counters = { api_requests: 0 };
  const context: RouteContext = {
    store,
    faults,
    outbox,
    accept_key: options.accept_key ?? defaultAcceptKey,
    control_routes: options.control_routes ?? true,
    new_event_id,
    hung_sockets,
    counters,
    abort: abort.signal,
  };

  return {
    plugin: async (app: FastifyInstance) => registerSimulatorRoutes(app, context),
    faults,
    state: buildState(store, outbox, counters),
    setWebhookUrl: (url) => outbox.setUrl(url),
    deliverWebhooksNow: () => outbox.deliverNow(),
    redeliverWebhook: (event_id, redeliver_options) =>
      outbox.redeliver(event_id, redeliver_options?.new_event_id ? new_event_id() : undefined),
    async close() {
      abort.abort();
      outbox.close();
      for (const socket of hung_sockets) socket.destroy();
      hung_sockets.clear();
    },
  };
}
