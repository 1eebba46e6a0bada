// Operator actions that reach the provider: approving a HOLD (forwarded once, atomically)
// and checking a reservation (records every capture the provider proves; never charges; releases
// a hold whose order the provider proves it never made, or the mounted simulator proves lost).

import { HttpError } from "../errors.js";
import { isCapture, type ReservationRow, type SettleOutcome } from "../ledger/index.js";
import { capture_unlanded_after_ms, orderAbsent, orderFound, type AbsentOutcome, type UnlandedOutcome } from "../ledger/complete.js";
import { record } from "../ledger/context.js";
import { getReservation, lockBlock } from "../ledger/statements.js";
import { cannotBeCaptured, isNoSuchResource, type ProviderOrder, type ProviderPayment } from "../provider/port.js";
import { paymentView, type GateContext } from "./context.js";
import { orderLostWithSimulator, releaseLostOrder } from "./lost-orders.js";
import { forwardOrder, holdUnproven, orderView, unprovenCapture } from "./money.js";

export function approve(context: GateContext, approval_id: string): Promise<Record<string, unknown>> {
  return context.work.run(() => forwardApproved(context, approval_id));
}

async function forwardApproved(context: GateContext, approval_id: string): Promise<Record<string, unknown>> {
  const grant = await context.ledger.beginApproval(approval_id);
  if ("refused" in grant) throw new HttpError(409, "approval_recheck_failed", grant.refused);
  const { approval, reservation } = grant;
  const call = {
    agent_id: approval.agent_id,
    key: approval.idempotency_key,
    reservation_id: reservation.reservation_id,
    approval_id,
    block_id: reservation.block_id,
  };
  const { result } = await forwardOrder(context, call, grant.args as Record<string, unknown>);
  return { approval_id, state: "approved", result };
}

type Linked = { kind: "found"; order_id: string } | { kind: "none" } | { kind: "unknown"; reason: string };

async function linkOrder(context: GateContext, reservation: ReservationRow): Promise<Linked> {
  if (reservation.order_id) return { kind: "found", order_id: reservation.order_id };
  // An order whose creation timed out is found by its receipt: Bursar's reservation id.
  const found = await context.provider.findOrdersByReceipt(reservation.reservation_id);
  // No answer (timeout, 5xx, rate limit) is not "no order": the order may exist, even be paid.
  if (found.kind === "unknown") return { kind: "unknown", reason: `the provider did not answer the order lookup (${found.reason})` };
  // Nor is a refused lookup (a 4xx): only an answer listing no order says there is none.
  if (found.kind === "refused") return { kind: "unknown", reason: `the provider refused the order lookup (${found.error.description})` };
  if (found.value.length === 0) return { kind: "none" };
  const order = found.value[0] as ProviderOrder;
  return context.ledger.transaction(async (tx, ledger_context): Promise<Linked> => {
    // The block lock comes before any write to its reservations (and before the log's lock).
    await lockBlock(tx, reservation.block_id);
    if (await orderFound(tx, ledger_context, reservation.reservation_id, orderView(order))) return { kind: "found", order_id: order.id };
    // Not named: another call named its order meanwhile, or another reservation has this one.
    const now = await getReservation(tx, reservation.reservation_id);
    if (now?.order_id) return { kind: "found", order_id: now.order_id };
    return { kind: "unknown", reason: now?.unknown_reason ?? `the provider's order ${order.id} for this receipt was not linked` };
  });
}

/**
 * The capture the reservation expects (payment, order, amount, currency): settled first, so it
 * commits before any other is weighed. The gate's orders are for the reservation's amount, and
 * Razorpay captures a payment for no other amount than its order's.
 */
function matches(payment: ProviderPayment, reservation: ReservationRow, order_id: string): boolean {
  return (
    isCapture(payment) &&
    payment.order_id === order_id &&
    payment.currency === reservation.currency &&
    payment.amount === reservation.amount &&
    (reservation.payment_id === null || reservation.payment_id === payment.id)
  );
}

type PaymentView = ReturnType<typeof paymentView>;
type Settlement = { payment: PaymentView; outcome: SettleOutcome["outcome"]; reason: string };
type Settled = { settlements: Settlement[]; unproven: string[] };

/**
 * Settles every capture the provider reports on the order as its webhook would: the one matching
 * the reservation first, then any other (a second payment, a capture of another payment than the
 * bound one, a larger amount or another currency, a late capture), which settleCapture rejects,
 * freezing the block and counting its money as unreconciled once per payment id. Money the
 * provider says moved is never answered as "no capture" while its webhook is lost. Unlike its
 * webhook, which is an amount conflict, one listed for less than the hold is not settled
 * (unprovenCapture): a look-up's answer for another amount is taken for no answer, so a misread
 * list freezes nothing, and its reason is answered.
 */
async function settleCaptures(context: GateContext, reservation: ReservationRow, order_id: string, payments: ProviderPayment[]): Promise<Settled> {
  // The order's own captures only: a listed payment of another order is not this reservation's.
  const captured = payments.filter((payment) => isCapture(payment) && payment.order_id === order_id);
  const ordered = [...captured.filter((payment) => matches(payment, reservation, order_id)), ...captured.filter((payment) => !matches(payment, reservation, order_id))];
  const settlements: Settlement[] = [];
  const skipped: string[] = [];
  for (const payment of ordered) {
    // One that does not match is weighed against the reservation as the settlements before it left
    // it (a match committed it): listed for less than a hold it would commit, it is no answer.
    const current = matches(payment, reservation, order_id) ? undefined : await context.ledger.reservation(reservation.reservation_id);
    const why = current ? unprovenCapture(payment, current) : undefined;
    if (why) {
      skipped.push(why);
      continue;
    }
    const view = paymentView(payment);
    const settled = await context.ledger.settle({ ...view, order_id }, "check");
    settlements.push({ payment: view, outcome: settled.outcome, reason: settled.reason });
  }
  return { settlements, unproven: skipped };
}

/** What the check answers for its settlements: a conflict first, then a capture applied, then a no-op. */
const outcome_rank: Record<Settlement["outcome"], number> = { rejected: 3, applied: 2, noop: 1 };

function headline(settlements: Settlement[]): Settlement | undefined {
  return settlements.reduce<Settlement | undefined>((best, next) => (best && outcome_rank[best.outcome] >= outcome_rank[next.outcome] ? best : next), undefined);
}

/**
 * The reservation's bound payment, when the provider lists it as one that can no longer be
 * captured (failed, refunded before any capture), is unbound, so another payment on the order
 * may be captured; undefined when there is none or the binding stays (a capture of it in
 * flight). A capture of it whose outcome was unknown is resolved with it: it moved nothing.
 */
async function unbindDeadPayment(context: GateContext, reservation_id: string, payments: ProviderPayment[]): Promise<ProviderPayment | undefined> {
  const reservation = await context.ledger.reservation(reservation_id);
  if (!reservation || reservation.status !== "held" || reservation.payment_id === null) return undefined;
  const bound = payments.find((payment) => payment.id === reservation.payment_id);
  if (!bound || !cannotBeCaptured(bound)) return undefined;
  return (await context.ledger.unbindUncapturable(reservation_id, bound, "check")) ? bound : undefined;
}

/**
 * The reservation's bound payment, when the provider lists it still authorized and nothing on the
 * order is captured, proves, once the capture's outcome has been unknown long enough, that the
 * capture did not land: that outcome is resolved (resolveUnlandedCapture). Undefined when the
 * reservation has no such capture.
 */
async function resolveUnlandedCapture(context: GateContext, reservation_id: string, payments: ProviderPayment[]): Promise<UnlandedOutcome | undefined> {
  const reservation = await context.ledger.reservation(reservation_id);
  // Not marked unknown yet is no reason to stop: a capture whose lease ran out is marked so there.
  if (!reservation || reservation.status !== "held" || reservation.payment_id === null) return undefined;
  const bound = payments.find((payment) => payment.id === reservation.payment_id);
  if (!bound || bound.status !== "authorized" || bound.captured === true) return undefined;
  return context.ledger.resolveUnlandedCapture(reservation_id, bound);
}

/** A reservation the provider has no order for: released once that proves none was made (orderAbsent). */
async function noOrder(context: GateContext, reservation: ReservationRow): Promise<Record<string, unknown>> {
  const absent = await context.ledger.transaction(async (tx, ledger_context): Promise<AbsentOutcome> => {
    await lockBlock(tx, reservation.block_id);
    return orderAbsent(tx, ledger_context, reservation.reservation_id);
  });
  const { reservation_id } = reservation;
  if (absent.kind === "released") return { reservation_id, outcome: "released", reason: absent.reason };
  const answer: Record<string, unknown> = { reservation_id, outcome: "not_found", reason: `the provider has no order for this reservation; ${absent.reason}` };
  if (absent.release_from_ms !== undefined) answer.release_from = new Date(absent.release_from_ms).toISOString();
  return answer;
}

/**
 * The provider says the reservation's order, one the gate made or linked, does not exist. About
 * an order another process's mounted simulator named, that proves the order lost with that
 * process, whatever this process's provider is: the hold is released (releaseLostOrder). About
 * any other order it proves nothing (the provider's keys may now be another account's, where the
 * order exists and can be paid): the money stays held and the outcome is unknown, as before.
 */
async function orderGone(context: GateContext, reservation: ReservationRow, order_id: string, description: string): Promise<Record<string, unknown>> {
  const { reservation_id } = reservation;
  const said = `the provider says order ${order_id} does not exist (${description})`;
  const made_by = reservation.order_made_by;
  if (!orderLostWithSimulator(context, reservation) || typeof made_by !== "string") {
    const reason = context.mounted_simulator
      ? `${said}, yet no other process's mounted simulator named that order (a real account or a standalone simulator did, or it was named before orders were stamped): it may exist where it was made; the money stays held`
      : `${said}; the gate made that order, so from this provider that is no proof nothing can be paid on it (its keys may now be another account's, where the order exists and can be paid): the money stays held`;
    return { reservation_id, order_id, outcome: "unknown", reason };
  }
  const lost = await context.ledger.transaction((tx, ledger_context) => releaseLostOrder(tx, ledger_context, reservation_id, order_id, made_by));
  if (lost.kind === "released") return { reservation_id, order_id, outcome: "released", reason: lost.reason };
  // Lost all the same: nothing can be paid on it. Only what this check may do is left for later.
  return { reservation_id, order_id, outcome: "not_found", reason: `${said}; the hold is not released now: ${lost.reason}` };
}

/**
 * Asks the provider about a reservation: settles every capture it proves on the reservation's
 * order (a matching one commits; a conflicting one is rejected, as its webhook would be), unbinds
 * a bound payment that can no longer be captured (and then settles again, so that another
 * payment's capture commits), and releases a hold whose order the provider proves it never made.
 * Never charges.
 */
export function checkReservation(context: GateContext, reservation_id: string): Promise<Record<string, unknown>> {
  return context.work.run(() => check(context, reservation_id));
}

async function check(context: GateContext, reservation_id: string): Promise<Record<string, unknown>> {
  const answer = await askProvider(context, reservation_id);
  if (changed_nothing.has(String(answer.outcome)) && answer.unbound_payment === undefined && answer.capture_resolved === undefined) await recordCheck(context, answer);
  return answer;
}

/** Outcomes of a check that wrote no settlement entry: the entry recordCheck writes is then its only evidence. */
const changed_nothing = new Set(["unknown", "no_capture", "noop", "not_found"]);

/** A check that changed nothing still asked the provider something: what it answered is recorded. */
async function recordCheck(context: GateContext, answer: Record<string, unknown>): Promise<void> {
  const { reservation_id, order_id, outcome, reason } = answer;
  const payments = (answer.payments as Array<{ id: string; status: string }> | undefined)?.map(({ id, status }) => ({ id, status }));
  const block_id = (await context.ledger.reservation(String(reservation_id)))?.block_id ?? null;
  const body = { action: "reservation.check", reservation_id, block_id, outcome, reason, ...(order_id === undefined ? {} : { order_id }), ...(payments ? { payments } : {}) };
  await context.ledger.transaction((tx, ledger_context) => record(tx, ledger_context, "gate.operator", body));
}

async function askProvider(context: GateContext, reservation_id: string): Promise<Record<string, unknown>> {
  const reservation = await context.ledger.reservation(reservation_id);
  if (!reservation) throw new HttpError(404, "not_found", `no reservation ${reservation_id}`);
  const linked = await linkOrder(context, reservation);
  if (linked.kind === "unknown") return { reservation_id, outcome: "unknown", reason: linked.reason };
  if (linked.kind === "none") return noOrder(context, reservation);
  const order_id = linked.order_id;
  const payments = await context.provider.fetchOrderPayments(order_id);
  if (payments.kind === "refused" && !payments.local && isNoSuchResource(payments)) return orderGone(context, reservation, order_id, payments.error.description);
  if (payments.kind !== "ok") {
    return { reservation_id, outcome: "unknown", reason: payments.kind === "unknown" ? payments.reason : payments.error.description };
  }
  // Read again: linking the order, or a webhook meanwhile, may have changed it.
  const current = (await context.ledger.reservation(reservation_id)) as ReservationRow;
  // Weighed against the payment bound now first: a capture of another one while it was bound was
  // made outside the gate, and is rejected (the block frozen) as its webhook would be.
  const { settlements, unproven: not_settled } = await settleCaptures(context, current, order_id, payments.value);
  const unbound = await unbindDeadPayment(context, reservation_id, payments.value);
  // The bound payment dead and unbound, another capture on the order now settles the reservation
  // in this same check (moving its money from unreconciled to spent), not only the next one.
  if (unbound) {
    const released = (await context.ledger.reservation(reservation_id)) as ReservationRow;
    const matching = payments.value.filter((payment) => matches(payment, released, order_id));
    settlements.push(...(await settleCaptures(context, released, order_id, matching)).settlements);
  }
  const answer: Record<string, unknown> = { reservation_id, order_id };
  const first = headline(settlements);
  const unsettled = not_settled.join("; ");
  if (first) Object.assign(answer, { outcome: first.outcome, reason: unsettled ? `${first.reason}; ${unsettled}` : first.reason, payment: first.payment, settlements });
  else if (unsettled) Object.assign(answer, { outcome: "unknown", reason: unsettled });
  else Object.assign(answer, { outcome: "no_capture", reason: "the provider reports no captured payment on the order" });
  // Not settled, so listed: the money stays held, in the inbox, until a webhook or a check proves it.
  if (unsettled) await holdUnproven(context, current, unsettled);
  if (unbound) answer.unbound_payment = paymentView(unbound);
  else if (!first && !unsettled) {
    const unlanded = await resolveUnlandedCapture(context, reservation_id, payments.value);
    if (unlanded?.kind === "resolved") {
      answer.reason = `${String(answer.reason)}; the bound payment is still authorized ${capture_unlanded_after_ms / 60_000} minutes or more after its capture went unanswered, so that capture moved nothing: the agent may capture again`;
      answer.capture_resolved = true;
    } else if (unlanded?.resolve_from_ms !== undefined) {
      answer.reason = `${String(answer.reason)}; the capture whose outcome is unknown may still land: a check resolves it once it has gone unanswered for ${capture_unlanded_after_ms / 60_000} minutes with the payment still authorized`;
      answer.resolve_from = new Date(unlanded.resolve_from_ms).toISOString();
    }
  }
  answer.payments = payments.value.map(paymentView);
  return answer;
}
