// Runs one labelled case on a fresh in-process Bursar (SQLite :memory:, the embedded
// simulator, a manual clock and deterministic ids) and reports what the gate did.

import { createHmac } from "node:crypto";
import { createBursar, sequentialIds, type Bursar } from "../index.js";
import type { Guard, PaymentState } from "../policy/index.js";
import { approve } from "../gate/operator.js";
import { createRazorpayProvider } from "../provider/razorpay/index.js";
import { event_id_header_name, signature_header_name } from "../provider/razorpay/webhook.js";
import { test_card_success } from "../provider/simulator/index.js";
import { buildServer } from "../server/app.js";
import { webhookRoutes } from "../server/routes/webhooks.js";
import type { CallSpec, EvalCase, Step, WebhookSpec } from "./cases.js";

export const eval_start_ms = Date.parse("2026-06-01T00:00:00.000Z");

/** The reference defaults of DESIGN.md, which a case's block step overrides. */
export const eval_block_defaults = Object.freeze({
  currency: "INR",
  reserved: 1_000_000,
  per_call_cap: 500_000,
  approval_threshold: 200_000,
  velocity: { max_calls: 10, window_seconds: 60 },
  ttl_seconds: 30 * 86_400,
});

export interface Outcome {
  effect?: string;
  rule?: string;
  webhook_effect?: string;
  status?: number;
  /** The amount a money call asked for, when it was an integer (for "money moved"). */
  amount?: number;
  /** For an injection payload case, what its clean twin got (runAll fills it in). */
  twin?: { effect?: string; rule?: string; error?: string };
  error?: string;
}

interface Clock {
  (): Date;
  now_ms: number;
}

interface World {
  bursar: Bursar;
  clock: Clock;
  tokens: Record<"A" | "B", string>;
  blocks: Partial<Record<"A" | "B", string>>;
  vars: Record<"order" | "payment" | "approval" | "reservation", string[]>;
  events: number;
}

function manualClock(): Clock {
  const clock = (() => new Date(clock.now_ms)) as Clock;
  clock.now_ms = eval_start_ms;
  return clock;
}

function substitute(value: unknown, world: World): unknown {
  if (typeof value === "string") {
    const match = /^\$(order|payment|approval|reservation)\.(last|\d+)$/.exec(value);
    if (!match) return value;
    const list = world.vars[match[1] as keyof World["vars"]];
    const found = match[2] === "last" ? list[list.length - 1] : list[Number(match[2])];
    // A reference to nothing is a broken case, not an argument to send on.
    if (found === undefined) throw new Error(`${value} names no ${match[1]} (the case made ${list.length})`);
    return found;
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, world));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, world)]));
  }
  return value;
}

async function remember(world: World, structured: Record<string, unknown>): Promise<void> {
  const order = structured.order as { id?: string } | undefined;
  if (order?.id) world.vars.order.push(order.id);
  if (typeof structured.reservation_id === "string") world.vars.reservation.push(structured.reservation_id);
  if (typeof structured.approval_id === "string" && structured.effect === "HOLD" && !structured.replayed) {
    world.vars.approval.push(structured.approval_id);
    // A HOLD's result names no reservation; the harness looks it up to reference it later.
    const approval = await world.bursar.ledger.approval(structured.approval_id);
    if (approval) world.vars.reservation.push(approval.reservation_id);
  }
}

async function callTool(world: World, spec: CallSpec): Promise<Record<string, unknown>> {
  const result = await world.bursar.gate.callTool(world.tokens[spec.as ?? "A"], spec.tool, substitute(spec.args, world));
  await remember(world, result.structuredContent);
  return result.structuredContent;
}

async function pay(world: World, order: string, card = test_card_success): Promise<void> {
  const order_id = substitute(order, world) as string;
  const response = await world.bursar.simulator!.app.inject({ method: "POST", url: `/simulator/sim/orders/${order_id}/pay`, payload: { card } });
  const body = response.json() as { razorpay_payment_id?: string; error?: { metadata?: { payment_id?: string } } };
  const payment_id = body.razorpay_payment_id ?? body.error?.metadata?.payment_id;
  if (!payment_id) throw new Error(`the checkout answered ${response.statusCode} with no payment id`);
  world.vars.payment.push(payment_id);
}

/** An operator's approve or deny; it must succeed, or be refused when the step says `refused`. */
async function operatorDecision(world: World, action: "approve" | "deny", approval: string, refused: boolean): Promise<void> {
  const approval_id = substitute(approval, world) as string;
  let error: unknown;
  try {
    // An approved HOLD's forwarded order is remembered as a call's is, so $order.last can name it.
    if (action === "approve") await remember(world, (await approve(world.bursar.gate.gateContext, approval_id)).result as Record<string, unknown>);
    else await world.bursar.ledger.deny(approval_id);
  } catch (caught) {
    error = caught;
  }
  if (error !== undefined && !refused) throw error;
  if (error === undefined && refused) throw new Error(`the operator's ${action} was expected to be refused, and succeeded`);
}

function webhookBody(spec: WebhookSpec, world: World): string {
  if (spec.raw !== undefined) return spec.raw;
  const payment = spec.payment ? (substitute(spec.payment, world) as Record<string, unknown>) : undefined;
  const order = spec.order ? (substitute(spec.order, world) as Record<string, unknown>) : undefined;
  const payload: Record<string, unknown> = {};
  if (payment) payload.payment = { entity: { entity: "payment", captured: payment.status === "captured", method: "card", created_at: 1_780_000_000, ...payment } };
  if (order) payload.order = { entity: { entity: "order", amount_paid: 0, receipt: null, notes: [], created_at: 1_780_000_000, ...order } };
  return JSON.stringify({ entity: "event", account_id: "acc_Eval", event: spec.event, contains: Object.keys(payload), payload, created_at: 1_780_000_000 });
}

function signature(spec: WebhookSpec, raw: string, secret: string): string | undefined {
  const sign = (text: string) => createHmac("sha256", secret).update(text).digest("hex");
  switch (spec.signature ?? "valid") {
    case "missing":
      return undefined;
    case "invalid":
      return "0".repeat(64);
    case "reserialized":
      return sign(JSON.stringify(JSON.parse(raw), null, 2));
    default:
      return sign(raw);
  }
}

async function sendWebhook(world: World, spec: WebhookSpec): Promise<Outcome> {
  let raw = webhookBody(spec, world);
  if (spec.pad_to_bytes !== undefined) raw = raw.padEnd(spec.pad_to_bytes, " ");
  const headers: Record<string, string> = { "content-type": "application/json" };
  const signed = signature(spec, raw, world.bursar.simulator!.webhook_secret);
  if (signed) headers[signature_header_name] = signed;
  if (spec.event_id_header !== false) headers[event_id_header_name] = spec.event_id ?? `evt_eval_${++world.events}`;
  let app = world.bursar.simulator!.app;
  if (spec.no_secret) {
    const provider = createRazorpayProvider({ key_id: "rzp_test_eval", key_secret: "eval" });
    app = await buildServer({ logger: false, plugins: [webhookRoutes({ ...world.bursar.gate.gateContext, provider })] });
  }
  const response = await app.inject({ method: "POST", url: "/webhooks/razorpay", headers, payload: raw });
  if (spec.no_secret) await app.close();
  const outcome = (response.json() as { outcome?: string }).outcome;
  const webhook_effect =
    response.statusCode !== 200 ? "REFUSE" : outcome === "applied" ? "APPLY" : outcome === "rejected" ? "REJECT" : "NOOP";
  return { webhook_effect, status: response.statusCode };
}

async function blockStep(world: World, agent: "A" | "B", action: "revoke" | "freeze" | "unfreeze" | "corrupt"): Promise<void> {
  const block_id = world.blocks[agent];
  if (!block_id) return;
  const operator = world.bursar.operator;
  if (action === "revoke") await operator.revoke(block_id);
  else if (action === "freeze") await operator.freeze(block_id, "eval");
  else if (action === "unfreeze") await operator.unfreeze(block_id);
  else await world.bursar.driver.transaction((tx) => tx.run("UPDATE blocks SET per_call_cap = 1.5 WHERE block_id = ?", [block_id]));
}

/**
 * A held capture is decided as the gate decides one, on the payment the provider reports, and
 * left in flight (never forwarded): a capture still executing. The payment must exist.
 */
async function heldPayment(world: World, args: unknown): Promise<PaymentState> {
  const payment_id = String((args as { payment_id?: unknown } | null)?.payment_id);
  const outcome = await world.bursar.gate.provider.fetchPayment(payment_id);
  if (outcome.kind !== "ok" || !outcome.value.order_id) throw new Error(`the provider has no payment ${payment_id} on an order`);
  const { id, order_id, amount, currency, status } = outcome.value;
  return { fetched: true, id, order_id, amount, currency, status };
}

/** An order made with the provider key, not through the gate: its receipt may name a reservation ($reservation.last). */
async function outsideOrder(world: World, order: { amount: number; currency: string; receipt: string }): Promise<void> {
  const made = await world.bursar.gate.provider.createOrder({ ...order, receipt: substitute(order.receipt, world) as string });
  if (made.kind !== "ok") throw new Error(`the provider made no order (${made.kind})`);
  world.vars.order.push(made.value.id);
}

async function runStep(world: World, step: Step): Promise<void> {
  if ("call" in step) await callTool(world, step.call);
  else if ("hold" in step) {
    const agent = await world.bursar.ledger.authenticateAgent(world.tokens[step.hold.as ?? "A"]);
    const args = substitute(step.hold.args, world);
    const payment = step.hold.tool === "capture_payment" ? await heldPayment(world, args) : undefined;
    const auth = await world.bursar.ledger.authorize({ agent_id: agent!.agent_id, tool: step.hold.tool, args, ...(payment ? { payment } : {}) });
    if (auth.reservation) world.vars.reservation.push(auth.reservation.reservation_id);
  } else if ("repeat" in step) {
    for (let index = 0; index < step.repeat.times; index++) await callTool(world, step.repeat.call);
  } else if ("pay" in step) await pay(world, step.pay.order, step.pay.card);
  else if ("advance_ms" in step) world.clock.now_ms += step.advance_ms;
  else if ("revoke" in step) await blockStep(world, step.revoke, "revoke");
  else if ("freeze" in step) await blockStep(world, step.freeze, "freeze");
  else if ("unfreeze" in step) await blockStep(world, step.unfreeze, "unfreeze");
  else if ("corrupt_block" in step) await blockStep(world, step.corrupt_block, "corrupt");
  else if ("approve" in step) await operatorDecision(world, "approve", step.approve, step.refused === true);
  else if ("deny" in step) await operatorDecision(world, "deny", step.deny, step.refused === true);
  else if ("fault" in step) world.bursar.simulator!.simulator.faults.set(step.fault);
  else if ("outside_order" in step) await outsideOrder(world, step.outside_order);
  else if ("webhook" in step) await sendWebhook(world, step.webhook);
}

async function createWorld(eval_case: EvalCase, guards: readonly Guard[]): Promise<World> {
  const clock = manualClock();
  const bursar = await createBursar({ db: ":memory:", clock, ids: sequentialIds(), guards });
  const world: World = { bursar, clock, tokens: { A: "", B: "" }, blocks: {}, vars: { order: [], payment: [], approval: [], reservation: [] }, events: 0 };
  const steps = eval_case.setup ?? [];
  for (const agent of ["A", "B"] as const) {
    const created = await bursar.operator.createAgent({ name: `agent-${agent}` });
    world.tokens[agent] = created.token;
    if (steps.some((step) => "no_block" in step && step.no_block === agent)) continue;
    const override = steps.find((step) => (agent === "A" ? "block" in step : "block_b" in step)) as Record<string, Record<string, unknown>> | undefined;
    const block = await bursar.operator.createBlock({
      ...eval_block_defaults,
      ...(override?.[agent === "A" ? "block" : "block_b"] ?? {}),
      agent_id: created.agent_id,
    } as Parameters<typeof bursar.operator.createBlock>[0]);
    world.blocks[agent] = block.block_id;
  }
  return world;
}

function callOutcome(structured: Record<string, unknown>, args: unknown): Outcome {
  const effect = String(structured.effect ?? "NONE");
  const rule = effect === "BLOCK" ? String(structured.rule) : effect === "HOLD" ? "HOLD" : structured.replayed ? "R7" : "ALLOW";
  const amount = (args as { amount?: unknown } | null)?.amount;
  return Number.isSafeInteger(amount) ? { effect, rule, amount: amount as number } : { effect, rule };
}

/** Runs one part of a case; an error names the part (a setup step, the call) it came from. */
async function within<T>(part: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new Error(`${part}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

export async function runCase(eval_case: EvalCase, guards: readonly Guard[]): Promise<Outcome> {
  let world: World | undefined;
  try {
    world = await createWorld(eval_case, guards);
    for (const [index, step] of (eval_case.setup ?? []).entries()) {
      await within(`setup step ${index + 1} (${Object.keys(step)[0]})`, () => runStep(world as World, step));
    }
    if (eval_case.at !== undefined) world.clock.now_ms = Math.max(world.clock.now_ms, eval_start_ms + eval_case.at);
    const webhook = eval_case.webhook;
    if (webhook) return await within("webhook", () => sendWebhook(world as World, webhook));
    const call = eval_case.call as CallSpec;
    const structured = await within("call", () => callTool(world as World, { ...call, as: call.as ?? eval_case.caller ?? "A" }));
    return callOutcome(structured, substitute(call.args, world));
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  } finally {
    await world?.bursar.close();
  }
}
