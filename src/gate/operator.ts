// Operator actions that reach the provider: approving a HOLD (forwarded once, atomically)
// and checking a reservation (settles only a capture the provider proves; never charges).

import { HttpError } from "../errors.js";
import type { ReservationRow } from "../ledger/index.js";
import { orderFound } from "../ledger/complete.js";
import { lockBlock } from "../ledger/statements.js";
import type { ProviderOrder, ProviderPayment } from "../provider/port.js";
import { paymentView, type GateContext } from "./context.js";
import { forwardOrder, orderView } from "./money.js";

export async function approve(context: GateContext, approval_id: string): Promise<Record<string, unknown>> {
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
  if (found.kind === "unknown") return { kind: "unknown", reason: found.reason };
  if (found.kind === "refused" || found.value.length === 0) return { kind: "none" };
  const order = found.value[0] as ProviderOrder;
  await context.ledger.transaction(async (tx, ledger_context) => {
    // The block lock comes before any write to its reservations (and before the log's lock).
    await lockBlock(tx, reservation.block_id);
    await orderFound(tx, ledger_context, reservation.reservation_id, orderView(order));
  });
  return { kind: "found", order_id: order.id };
}

function matches(payment: ProviderPayment, reservation: ReservationRow, order_id: string): boolean {
  return (
    payment.status === "captured" &&
    payment.order_id === order_id &&
    payment.currency === reservation.currency &&
    payment.amount <= reservation.amount &&
    (reservation.payment_id === null || reservation.payment_id === payment.id)
  );
}

/** Asks the provider about a reservation and settles only a matching, proven capture. */
export async function checkReservation(context: GateContext, reservation_id: string): Promise<Record<string, unknown>> {
  const reservation = await context.ledger.reservation(reservation_id);
  if (!reservation) throw new HttpError(404, "not_found", `no reservation ${reservation_id}`);
  const linked = await linkOrder(context, reservation);
  if (linked.kind === "unknown") return { reservation_id, outcome: "unknown", reason: `the provider did not answer the order lookup (${linked.reason})` };
  if (linked.kind === "none") return { reservation_id, outcome: "not_found", reason: "the provider has no order for this reservation" };
  const order_id = linked.order_id;
  const payments = await context.provider.fetchOrderPayments(order_id);
  if (payments.kind !== "ok") {
    return { reservation_id, outcome: "unknown", reason: payments.kind === "unknown" ? payments.reason : payments.error.description };
  }
  const captured = payments.value.find((payment) => matches(payment, reservation, order_id));
  if (!captured) {
    return { reservation_id, order_id, outcome: "no_capture", payments: payments.value.map(paymentView) };
  }
  const settled = await context.ledger.settle({ ...paymentView(captured), order_id }, "check");
  return { reservation_id, order_id, outcome: settled.outcome, reason: settled.reason, payment: paymentView(captured) };
}
