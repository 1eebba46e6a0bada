// The simulator's HTTP routes: Razorpay's /v1 API (Basic auth, fault knobs applied), the test
// checkout under /sim/orders, and the /sim control routes for faults, webhooks and letting an
// authorization run out.

import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { badRequest, messages, ok, serverError, tooManyRequests, unauthorized, type SimAnswer } from "./errors.js";
import { fault_settings_patch_schema, type FaultState, type RequestFault, type SimulatorApiRoute } from "./faults.js";
import { wireOrder, wirePayment, type SimStore } from "./store.js";
import { isLuhnValid, validateCapture, validateCreateOrder } from "./validation.js";
import type { WebhookOutbox } from "./webhooks.js";

/** Simulator bodies are small; Razorpay's own requests are a few hundred bytes. */
export const simulator_body_max_bytes = 65_536;
/** A hung ("timeout") request is cut off after this, so a client without a timeout cannot pin a socket forever. */
export const hang_max_ms = 120_000;
export const list_count_default = 10;
export const list_count_max = 100;

export const test_card_success = "4111111111111111";
export const test_card_declined = "4000000000000002";
const declining_cards: ReadonlySet<string> = new Set([test_card_declined]);

export interface RouteContext {
  store: SimStore;
  faults: FaultState;
  outbox: WebhookOutbox;
  accept_key: (key_id: string, key_secret: string) => boolean;
  control_routes: boolean;
  new_event_id: () => string;
  hung_sockets: Set<Socket>;
  counters: { api_requests: number };
  abort: AbortSignal;
}

type Params = { id: string };

function authenticate(header: string | undefined, accept: RouteContext["accept_key"]): SimAnswer | undefined {
  if (!header || !/^Basic /i.test(header)) return unauthorized(messages.api_key_missing);
  const decoded = Buffer.from(header.slice("Basic ".length).trim(), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const key_id = colon < 0 ? decoded : decoded.slice(0, colon);
  const key_secret = colon < 0 ? "" : decoded.slice(colon + 1);
  if (!key_id) return unauthorized(messages.api_key_missing);
  return accept(key_id, key_secret) ? undefined : unauthorized(messages.api_key_invalid);
}

/** The answer a fault that answers gives; undefined for a fault that cuts or hangs the connection. */
function errorAnswer(fault: RequestFault): SimAnswer | undefined {
  switch (fault.kind) {
    case "error_5xx":
      return serverError(fault.status);
    case "error_4xx":
      return badRequest("The request was refused by the simulator's error_4xx fault.");
    case "rate_limit":
      return tooManyRequests();
    default:
      return undefined;
  }
}

function strike(context: RouteContext, fault: RequestFault, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = errorAnswer(fault);
  if (answer) return reply.status(answer.status).send(answer.body);
  reply.hijack();
  const socket = request.raw.socket;
  if (fault.kind === "reset") {
    socket.destroy();
    return reply;
  }
  // Hang: never answer; the client's own timeout decides. Cut off eventually, and on close().
  context.hung_sockets.add(socket);
  const timer = setTimeout(() => socket.destroy(), hang_max_ms);
  timer.unref();
  socket.once("close", () => {
    clearTimeout(timer);
    context.hung_sockets.delete(socket);
  });
  return reply;
}

/** Wraps a /v1 handler: latency, then a fault before or after the request takes effect, then auth. */
function api(context: RouteContext, route: SimulatorApiRoute, handle: (request: FastifyRequest) => SimAnswer) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    context.counters.api_requests += 1;
    // The fault belongs to the request as it arrives: one still sleeping off its latency must not
    // take a fault a test set for the next request after it.
    const fault = context.faults.takeRequestFault(route);
    const latency_ms = context.faults.latencyMs(route);
    if (latency_ms > 0) await sleep(latency_ms, undefined, { signal: context.abort });
    // A 4xx (a refusal, or a 429 rate limit) never takes effect, whatever after_processing says.
    const refusal = fault?.kind === "error_4xx" || fault?.kind === "rate_limit";
    if (fault && (refusal || !context.faults.afterProcessing())) return strike(context, fault, request, reply);
    const answer = authenticate(request.headers.authorization, context.accept_key) ?? handle(request);
    if (fault) return strike(context, fault, request, reply);
    return reply.status(answer.status).send(answer.body);
  };
}

function listOrders(context: RouteContext, query: Record<string, unknown>): SimAnswer {
  const unknown = Object.keys(query).find((key) => !["receipt", "count", "skip"].includes(key));
  if (unknown) return badRequest(`${unknown} is/are not required and should not be sent`, unknown);
  const count = query.count === undefined ? list_count_default : Number(query.count);
  const skip = query.skip === undefined ? 0 : Number(query.skip);
  if (!Number.isInteger(count) || count < 1 || count > list_count_max) {
    return badRequest(`The count must be between 1 and ${list_count_max}.`, "count");
  }
  if (!Number.isInteger(skip) || skip < 0) return badRequest("The skip must be at least 0.", "skip");
  const receipt = typeof query.receipt === "string" ? query.receipt : undefined;
  // Razorpay lists newest first.
  const all = [...context.store.orders.values()].reverse();
  const matching = receipt === undefined ? all : all.filter((order) => order.receipt === receipt);
  const items = matching.slice(skip, skip + count).map(wireOrder);
  return ok({ entity: "collection", count: items.length, items });
}

function registerApiRoutes(app: FastifyInstance, context: RouteContext): void {
  const { store } = context;
  const limits = { bodyLimit: simulator_body_max_bytes };
  app.post("/v1/orders", limits, api(context, "POST /v1/orders", (request) => {
    const input = validateCreateOrder(request.body);
    return "ok" in input ? store.createOrder(input.value) : input;
  }));
  app.get("/v1/orders", api(context, "GET /v1/orders", (request) => listOrders(context, request.query as Record<string, unknown>)));
  app.get<{ Params: Params }>("/v1/orders/:id", api(context, "GET /v1/orders/:id", (request) => {
    const order = store.orders.get((request.params as Params).id);
    return order ? ok(wireOrder(order)) : badRequest(messages.id_not_found);
  }));
  app.get<{ Params: Params }>("/v1/orders/:id/payments", api(context, "GET /v1/orders/:id/payments", (request) => {
    const order = store.orders.get((request.params as Params).id);
    if (!order) return badRequest(messages.id_not_found);
    const items = store.paymentsOf(order.id).reverse().map(wirePayment);
    return ok({ entity: "collection", count: items.length, items });
  }));
  app.get<{ Params: Params }>("/v1/payments/:id", api(context, "GET /v1/payments/:id", (request) => {
    const payment = store.payments.get((request.params as Params).id);
    return payment ? ok(wirePayment(payment)) : badRequest(messages.id_not_found);
  }));
  app.post<{ Params: Params }>("/v1/payments/:id/capture", limits, api(context, "POST /v1/payments/:id/capture", (request) => {
    const payment = store.payments.get((request.params as Params).id);
    if (!payment) return badRequest(messages.id_not_found);
    const input = validateCapture(request.body);
    return "ok" in input ? store.capture(payment, input.value) : input;
  }));
}

function checkout(context: RouteContext, order_id: string, body: unknown): SimAnswer {
  const order = context.store.orders.get(order_id);
  if (!order) return badRequest(messages.id_not_found);
  const card = typeof body === "object" && body !== null ? (body as { card?: unknown }).card : undefined;
  if (typeof card !== "string") return badRequest("The card field is required.", "card");
  const digits = card.replace(/[\s-]/g, "");
  if (!/^\d{12,19}$/.test(digits) || !isLuhnValid(digits)) return badRequest(messages.card_not_legitimate, "card");
  return context.store.pay(order, digits, declining_cards.has(digits));
}

function registerControlRoutes(app: FastifyInstance, context: RouteContext): void {
  app.get("/sim/faults", async () => context.faults.get());
  app.post("/sim/faults", { bodyLimit: simulator_body_max_bytes }, async (request, reply) => {
    const patch = fault_settings_patch_schema.safeParse(request.body ?? {});
    if (!patch.success) {
      const issue = patch.error.issues[0];
      const field = issue ? issue.path.join(".") : undefined;
      const answer = badRequest(`invalid fault settings: ${issue?.message ?? "invalid"}`, field || undefined);
      return reply.status(answer.status).send(answer.body);
    }
    return context.faults.set(patch.data);
  });
  app.delete("/sim/faults", async () => context.faults.reset());
  app.post<{ Params: Params }>("/sim/payments/:id/expire", async (request, reply) => {
    const payment = context.store.payments.get(request.params.id);
    const answer = payment ? context.store.expireAuthorization(payment) : badRequest(messages.id_not_found);
    return reply.status(answer.status).send(answer.body);
  });
  app.post<{ Params: Params }>("/sim/payments/:id/refund", async (request, reply) => {
    const payment = context.store.payments.get(request.params.id);
    const answer = payment ? context.store.refundCapture(payment) : badRequest(messages.id_not_found);
    return reply.status(answer.status).send(answer.body);
  });
  app.get("/sim/webhooks", async () => ({ entity: "collection", items: context.outbox.list() }));
  app.post("/sim/webhooks/deliver", async () => context.outbox.deliverNow());
  app.post("/sim/webhooks/redeliver", { bodyLimit: simulator_body_max_bytes }, async (request, reply) => {
    const body = (request.body ?? {}) as { event_id?: unknown; new_event_id?: unknown };
    if (typeof body.event_id !== "string") {
      const answer = badRequest("The event_id field is required.", "event_id");
      return reply.status(answer.status).send(answer.body);
    }
    const entry = context.outbox.redeliver(body.event_id, body.new_event_id === true ? context.new_event_id() : undefined);
    if (!entry) {
      const answer = badRequest(messages.id_not_found, "event_id");
      return reply.status(answer.status).send(answer.body);
    }
    return { event_id: entry.event_id, seq: entry.seq, state: entry.state };
  });
}

/** Framework errors (bad JSON, body too large) answered in Razorpay's shape, inside this plugin only. */
function razorpayErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  const status = error.statusCode ?? 500;
  if (status === 413) return reply.status(413).send(badRequest("The request body is too large.").body);
  if (status >= 400 && status < 500) return reply.status(400).send(badRequest(`The request is invalid: ${error.message}`).body);
  const answer = serverError(500);
  return reply.status(answer.status).send(answer.body);
}

export function registerSimulatorRoutes(app: FastifyInstance, context: RouteContext): void {
  app.setErrorHandler(razorpayErrorHandler);
  registerApiRoutes(app, context);
  app.post<{ Params: { order_id: string } }>(
    "/sim/orders/:order_id/pay",
    { bodyLimit: simulator_body_max_bytes },
    async (request, reply) => {
      const answer = checkout(context, request.params.order_id, request.body);
      return reply.status(answer.status).send(answer.body);
    },
  );
  if (context.control_routes) registerControlRoutes(app, context);
}
