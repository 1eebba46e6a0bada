// One money call end to end: decide + hold (one transaction, with evidence) → provider →
// settle or mark unknown (one transaction, with evidence). Only a 4xx to order creation
// releases; a capture error re-fetches the payment and acts on what the provider reports.

import { redacted, scrub, withoutSecretKeys } from "../evidence/index.js";
import { blockSummary as summaryOfRow, isCapture, payment_not_asked, type AuthorizeResult, type CallRef, type OrderRecord, type ReservationRow, type SentKey } from "../ledger/index.js";
import { markUnknown } from "../ledger/settle.js";
import { lockedReservation } from "../ledger/statements.js";
import { note_value_length_max, receipt_note_key, type PaymentState } from "../policy/index.js";
import { cannotBeCaptured, isNoSuchResource, isPaymentId, type ProviderOrder, type ProviderPayment } from "../provider/port.js";
import { blockSummary, paymentView, type GateContext } from "./context.js";
import { timedStep } from "./observer.js";
import { replayResult } from "./replay.js";
import { captureAllowed, captureConflict, captureUnanswered, held, orderAfterRelease, orderAllowed, outcomeUnknown, providerRefused, refusal, type ToolResult, unknownAfterRelease } from "./results.js";

type Args = Record<string, unknown>;

/**
 * What the agent's receipt and notes become: Bursar's reservation id is the provider receipt,
 * the agent's receipt goes into notes.buyer_receipt. Secret-looking values (bearer tokens,
 * provider keys, card numbers, secret-named keys) are redacted first: nothing secret is
 * written down, and notes are a classic exfiltration channel for an injected agent.
 */
export function providerNotes(args: Args): Record<string, string> {
  // A note whose key looks like a secret is left out (scrubbing would replace all the notes); an
  // approved call's stored arguments had theirs left out the same way (authorize.ts).
  const given = args.notes && typeof args.notes === "object" ? Object.entries(withoutSecretKeys(args.notes as Record<string, unknown>)) : [];
  // A number is scrubbed as a number first: as a string, a 17- to 19-digit card number rounded by
  // JSON.parse fails the Luhn check and would reach the provider nearly whole.
  const notes: Record<string, string> = Object.fromEntries(given.map(([key, value]) => [key, String(typeof value === "number" ? scrub(value) : value)]));
  if (typeof args.receipt === "string") notes[receipt_note_key] = args.receipt;
  // Scrubbing can lengthen a value ("https://u:p@h" becomes "https://u:[redacted]@h"): one R0
  // let through at the limit is then replaced whole, so the provider does not refuse it.
  return Object.fromEntries(Object.entries(scrub(notes)).map(([key, value]) => [key, value.length > note_value_length_max ? redacted : value]));
}

export function orderView(order: ProviderOrder): OrderRecord {
  return {
    id: order.id,
    amount: order.amount,
    currency: order.currency,
    status: order.status,
    receipt: order.receipt,
    notes: order.notes,
    created_at: order.created_at,
  };
}

async function decided(context: GateContext, auth: AuthorizeResult, tool: string): Promise<ToolResult | undefined> {
  context.observer?.decision(tool, auth.verdict);
  if (auth.verdict.replay) return replayResult(context, auth);
  if (auth.verdict.effect === "BLOCK") return refusal(auth.verdict, auth.evidence);
  return undefined;
}

function callRef(agent_id: string, auth: AuthorizeResult): CallRef {
  const reservation = auth.reservation;
  const call: CallRef = { agent_id, key: auth.key?.key as string, reservation_id: reservation?.reservation_id as string };
  if (reservation) call.block_id = reservation.block_id;
  return call;
}

/** Forwards an allowed (or approved) order and records the provider's answer; an outcome left
 *  unknown (the hold kept for the operator) is counted for an agent's call and an approval alike. */
export async function forwardOrder(context: GateContext, call: CallRef, args: Args) {
  const outcome = await context.provider.createOrder({
    amount: args.amount as number,
    currency: String(args.currency).toUpperCase(),
    receipt: call.reservation_id,
    notes: providerNotes(args),
  });
  const forwarded = outcome.kind === "ok" ? { kind: "ok" as const, value: orderView(outcome.value) as never } : outcome;
  const completion = await timedStep(context.observer, "create_order", "complete", () => context.ledger.completeOrder(call, forwarded));
  if (completion.result.provider === "unknown" && completion.result.released !== true) context.observer?.unknownOutcome("create_order");
  return { result: completion.result, block: summaryOfRow(completion.block), outcome };
}

/** `sent`: the idempotency_key as the agent sent it, when the arguments carry a stand-in (SentKey). */
export async function createOrder(context: GateContext, agent_id: string, args: unknown, sent: SentKey = {}): Promise<ToolResult> {
  const auth = await timedStep(context.observer, "create_order", "decide", () => context.ledger.authorize({ agent_id, tool: "create_order", args, ...sent }));
  const early = await decided(context, auth, "create_order");
  if (early) return early;
  if (auth.verdict.effect === "HOLD" && auth.approval && auth.block) {
    return held(auth.verdict, auth.approval, summaryOfRow(auth.block), auth.evidence, false);
  }
  const call = callRef(agent_id, auth);
  const { block, outcome, result } = await forwardOrder(context, call, args as Args);
  // An order the ledger would not name (another reservation has it): the call's outcome is unknown.
  const unnamed = outcome.kind === "ok" && result.provider === "unknown";
  if (unnamed && result.released === true) return unknownAfterRelease(call.reservation_id, String(result.reason), auth.evidence);
  if (unnamed) return outcomeUnknown(call.reservation_id, String(result.reason), auth.evidence, false);
  if (outcome.kind === "ok" && result.provider === "late_order") {
    return orderAfterRelease(orderView(outcome.value), call.reservation_id, String(result.reason), auth.evidence);
  }
  if (outcome.kind === "ok") return orderAllowed(orderView(outcome.value), call.reservation_id, block, auth.evidence, false);
  if (outcome.kind === "refused") return providerRefused(call.reservation_id, outcome.error, auth.evidence, block);
  if (result.released === true) return unknownAfterRelease(call.reservation_id, String(result.reason), auth.evidence);
  return outcomeUnknown(call.reservation_id, outcome.reason, auth.evidence, false);
}

/** The payment a capture names, as the provider reports it; fetched only for a well-formed id.
 *  `payment` is the provider's answer, when it gave one the decision can use. */
async function fetchNamedPayment(context: GateContext, args: unknown): Promise<{ state: PaymentState; payment?: ProviderPayment & { order_id: string } }> {
  const payment_id = (args as Args | null)?.payment_id;
  if (!isPaymentId(payment_id)) return { state: { fetched: false, reason: "payment_id is not a provider payment id" } };
  const outcome = await context.provider.fetchPayment(payment_id);
  if (outcome.kind === "refused") {
    // No such payment is on none of the caller's orders, and is answered as another agent's is (CALLER).
    const not_found = isNoSuchResource(outcome) ? { not_found: true as const } : {};
    return { state: { fetched: false, reason: outcome.error.description, ...not_found } };
  }
  if (outcome.kind !== "ok") return { state: { fetched: false, reason: outcome.reason, unanswered: true } };
  const payment = outcome.value;
  if (!payment.order_id) return { state: { fetched: false, reason: "the payment has no order", not_found: true } };
  const state: PaymentState = { fetched: true, id: payment.id, order_id: payment.order_id, amount: payment.amount, currency: payment.currency, status: payment.status };
  return { state, payment: { ...payment, order_id: payment.order_id } };
}

/**
 * Before a capture on the caller's held reservation is decided: the payment bound to it, when the
 * provider reports it can no longer be captured (failed, or refunded before any capture, as
 * Razorpay does with an authorization not captured in time), is unbound, so that neither it nor
 * another payment on the order is refused for good under R3 ("already bound to another
 * payment"). The bound payment is asked for only when the capture names another one. The
 * binding stays while a capture of it is in flight (the ledger checks); one whose outcome was
 * unknown is resolved, since no capture can land on that payment any more.
 */
async function unbindDeadPayment(context: GateContext, agent_id: string, named: ProviderPayment & { order_id: string }): Promise<void> {
  const reservation = await context.ledger.reservationByOrder(named.order_id);
  // Another agent's reservation is not this caller's to touch (CALLER refuses the capture).
  if (!reservation || reservation.agent_id !== agent_id || reservation.status !== "held" || reservation.payment_id === null) return;
  const bound_id = reservation.payment_id;
  let bound: ProviderPayment | undefined = named.id === bound_id ? named : undefined;
  if (!bound) {
    const fetched = await context.provider.fetchPayment(bound_id);
    bound = fetched.kind === "ok" && fetched.value.id === bound_id ? fetched.value : undefined;
  }
  if (bound && cannotBeCaptured(bound)) await context.ledger.unbindUncapturable(reservation.reservation_id, bound, "capture");
}

/**
 * Why a capture the provider reports on a reservation's order (a payment it was asked about, or
 * lists on the order) is not settled on that reservation, or undefined: one the ledger would
 * commit for less than the hold, releasing the rest (the reservation still held, the payment the
 * bound one or none bound, in its currency). The gate's orders are for the reservation's amount,
 * and Razorpay captures a payment for its order's amount only, so such an answer is no answer, as
 * a capture's own answer for another amount is (notAsked): the money stays held until a webhook
 * or a check proves the capture. Any other capture is settled, and a conflict rejected as its
 * webhook would be.
 */
export function unprovenCapture(payment: ProviderPayment, reservation: ReservationRow): string | undefined {
  const bound = reservation.payment_id === null || reservation.payment_id === payment.id;
  if (reservation.status !== "held" || !bound || payment.currency !== reservation.currency || payment.amount >= reservation.amount) return undefined;
  return `the provider reports payment ${payment.id} captured for ${payment.amount} ${payment.currency}, not the ${reservation.amount} ${reservation.currency} held: an answer for another amount is no answer, and the money stays held`;
}

/** Lists a held reservation whose capture the provider reports unproven in the inbox (outcome
 *  unknown, with the reason): left as it was, the money stayed held outside any list an operator
 *  watches, until a webhook that might never come. */
export async function holdUnproven(context: GateContext, reservation: ReservationRow, reason: string): Promise<void> {
  await context.ledger.transaction(async (tx, ledger_context) => {
    const current = await lockedReservation(tx, reservation.reservation_id);
    if (current) await markUnknown(tx, ledger_context, current, reason);
  });
}

/**
 * Before a capture is decided: a payment the provider reports captured on the caller's own held
 * reservation is proof that money moved (an earlier capture that went unanswered and landed
 * later, or one made with the merchant's key, its webhooks lost). It is settled as its webhook
 * would be, so the decision sees the reservation committed; refused as "captured, not
 * authorized" instead, its money stayed held and nothing told an operator. One reported for less
 * than the hold is not (unprovenCapture): the reservation is listed outcome-unknown instead.
 */
async function settleLandedCapture(context: GateContext, agent_id: string, named: ProviderPayment & { order_id: string }): Promise<void> {
  if (!isCapture(named)) return;
  const reservation = await context.ledger.reservationByOrder(named.order_id);
  // Another agent's reservation is not this caller's to touch; its webhook or a check settles it.
  if (!reservation || reservation.agent_id !== agent_id || reservation.status !== "held") return;
  const unproven = unprovenCapture(named, reservation);
  if (unproven) return holdUnproven(context, reservation, unproven);
  await context.ledger.settle({ ...paymentView(named), order_id: named.order_id }, "capture");
}

/** What a capture asked the provider for: the amount and (upper-case) currency it sent. */
type Asked = { amount: number; currency: string };

/**
 * Why a payment the provider answered with is not what this call asked about (the payment it
 * bound, of its order, for the amount and currency it sent), or undefined. R3 made the amount
 * sent the authorized payment's, so an answer for any other amount proves nothing about it.
 */
function notAsked(payment: ProviderPayment, auth: AuthorizeResult, asked: Asked): string | undefined {
  const bound = auth.reservation;
  if (payment.id !== bound?.payment_id || (payment.order_id !== null && payment.order_id !== bound.order_id)) {
    return `the provider answered with payment ${payment.id} of order ${payment.order_id ?? "(none)"}, not ${bound?.payment_id ?? "(none)"} of order ${bound?.order_id ?? "(none)"}`;
  }
  if (payment.amount !== asked.amount || payment.currency !== asked.currency) {
    return `the provider answered with payment ${payment.id} for ${payment.amount} ${payment.currency}, when asked to capture ${asked.amount} ${asked.currency}`;
  }
  return undefined;
}

async function settled(context: GateContext, call: CallRef, payment: ProviderPayment, auth: AuthorizeResult, asked: Asked): Promise<ToolResult> {
  // An answer about another payment, order, amount or currency settles nothing here (nor on
  // whichever block that order is): this reservation's outcome is unknown until a webhook or an
  // operator check proves it (a signed webhook for a lower amount is a conflict that freezes the block).
  const other = notAsked(payment, auth, asked);
  if (other) return captureOutcomeUnknown(context, call, auth, other);
  // A success that reports the payment not captured (still authorized, failed) is no proof
  // either way: ask the provider what happened, as after an error. afterCaptureError calls back
  // here only with a captured payment.
  if (!isCapture(payment)) {
    const reason = `the provider answered the capture with payment ${payment.id} ${payment.status}, not captured`;
    return afterCaptureError(context, call, auth, undefined, reason, asked);
  }
  // The order is the one the gate bound before capturing, whatever the answer omits.
  const order_id = payment.order_id ?? auth.reservation?.order_id ?? "";
  const view = { ...paymentView(payment), order_id };
  const completion = await timedStep(context.observer, "capture_payment", "complete", () => context.ledger.completeCapture(call, view));
  if (completion.outcome === "rejected") {
    return captureConflict(view, completion.reason, summaryOfRow(completion.block), completion.evidence);
  }
  return captureAllowed(view, summaryOfRow(completion.block), auth.evidence, false);
}

/** Money stays held and the payment bound; the reservation goes to the operator's inbox. */
async function captureOutcomeUnknown(context: GateContext, call: CallRef, auth: AuthorizeResult, reason: string): Promise<ToolResult> {
  const outcome = await context.ledger.captureUnknown(call, reason);
  // A webhook settled the payment while the capture and the re-fetch went unanswered.
  if (outcome.kind === "settled") return captureAllowed(paymentView(outcome.payment), summaryOfRow(outcome.block), auth.evidence, false);
  context.observer?.unknownOutcome("capture_payment");
  return outcomeUnknown(call.reservation_id, String(outcome.result.reason), auth.evidence, false);
}

/**
 * A capture error never releases: ask the provider what happened to the payment. Still not
 * captured: the key is dropped, so the agent may repeat the capture. Only the provider's refusal
 * (`error`), or a payment that can no longer be captured, proves this capture will not land; after
 * a timeout, a reset or a 5xx it still may, so the payment then stays bound to the reservation
 * and no second payment can be captured on it meanwhile.
 */
async function afterCaptureError(
  context: GateContext,
  call: CallRef,
  auth: AuthorizeResult,
  error: { code: string; description: string } | undefined,
  reason: string,
  asked: Asked,
): Promise<ToolResult> {
  const payment_id = (auth.reservation?.payment_id ?? "") as string;
  const check = await context.provider.fetchPayment(payment_id);
  if (check.kind === "ok" && isCapture(check.value)) return settled(context, call, check.value, auth, asked);
  if (check.kind === "ok") {
    const still_authorized = check.value.status === "authorized";
    const refused = error !== undefined;
    const abandoned = await context.ledger.abandonCapture(call, { payment_id, unbind: refused || !still_authorized, refused }, reason);
    // The capture landed after all, and a webhook settled it meanwhile.
    if (abandoned.kind === "settled") return captureAllowed(paymentView(abandoned.payment), summaryOfRow(abandoned.block), auth.evidence, false);
    const block = await blockSummary(context, auth.block?.block_id as string);
    if (error) return providerRefused(call.reservation_id, error, auth.evidence, block);
    return captureUnanswered(call.reservation_id, still_authorized, reason, auth.evidence, block);
  }
  return captureOutcomeUnknown(context, call, auth, reason);
}

/**
 * Decides a capture, asking the provider for its payment only when the payment can matter: a
 * call refused whatever the payment is never makes the provider answer for it. The agent's
 * captures already past that check but not yet decided count toward its velocity limit there,
 * as they will once decided, so captures sent all at once cannot each fetch the payment; one
 * not asked for waits for those to be decided first, so it cannot take the velocity slot of an
 * earlier capture still waiting for the provider, and is then checked again on what they
 * recorded (one of them may already have been counted in its row, or recorded nothing). A
 * payment bound to the reservation that can no longer be captured is unbound first, and one the
 * provider reports captured is settled first.
 */
async function decideCapture(context: GateContext, agent_id: string, args: unknown, sent: SentKey): Promise<AuthorizeResult> {
  const undecided = context.undecided_captures;
  const ahead = [...(undecided.get(agent_id) ?? [])];
  const decision = (async () => {
    let matters = await context.ledger.capturePaymentMatters(agent_id, args, ahead.length, sent);
    if (!matters && ahead.length > 0) {
      await Promise.allSettled(ahead);
      matters = await context.ledger.capturePaymentMatters(agent_id, args, 0, sent);
    }
    let payment: PaymentState = payment_not_asked;
    if (matters) {
      const named = await fetchNamedPayment(context, args);
      if (named.payment) {
        await unbindDeadPayment(context, agent_id, named.payment);
        await settleLandedCapture(context, agent_id, named.payment);
      }
      payment = named.state;
    }
    return timedStep(context.observer, "capture_payment", "decide", () => context.ledger.authorize({ agent_id, tool: "capture_payment", args, payment, ...sent }));
  })();
  const pending = undecided.get(agent_id) ?? new Set<Promise<unknown>>();
  pending.add(decision);
  undecided.set(agent_id, pending);
  try {
    return await decision;
  } finally {
    pending.delete(decision);
    if (pending.size === 0 && undecided.get(agent_id) === pending) undecided.delete(agent_id);
  }
}

/** `sent`: as for createOrder. */
export async function capturePayment(context: GateContext, agent_id: string, args: unknown, sent: SentKey = {}): Promise<ToolResult> {
  const auth = await decideCapture(context, agent_id, args, sent);
  const early = await decided(context, auth, "capture_payment");
  if (early) return early;
  const call = callRef(agent_id, auth);
  const { amount, currency } = args as { amount: number; currency: string };
  const payment_id = (auth.reservation?.payment_id ?? "") as string;
  const asked: Asked = { amount, currency: currency.toUpperCase() };
  const outcome = await context.provider.capturePayment(payment_id, asked);
  if (outcome.kind === "ok") return settled(context, call, outcome.value, auth, asked);
  const reason = outcome.kind === "refused" ? outcome.error.description : outcome.reason;
  return afterCaptureError(context, call, auth, outcome.kind === "refused" ? outcome.error : undefined, reason, asked);
}
