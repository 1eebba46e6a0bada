// The second atomic phase of a money call: the provider's answer and its evidence commit
// together. A proven refusal of an order releases; an unknown outcome keeps the hold.

import { record, type EvidenceRef, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import type { ApprovalRow, BlockRow, ReservationRow } from "./rows.js";
import { finishApproval } from "./approvals.js";
import {
  approvalByReservation,
  completeKeys,
  dropIdempotency,
  dropUnknownKeys,
  flagOutcomeUnknown,
  getIdempotency,
  getReservation,
  keyInFlightOn,
  lockBlock,
  reservationByOrder,
  storeResult,
} from "./statements.js";
import { markUnknown, releaseHold, settleCapture, type CapturedPayment, type SettleOutcome } from "./settle.js";
import { expireLeasesOfBlock } from "./sweep.js";

/** The provider's answer as the ledger needs it (the provider port's outcome has this shape). */
export type ForwardOutcome<T> =
  | { kind: "ok"; value: T }
  | { kind: "refused"; status: number; error: { code: string; description: string } }
  | { kind: "unknown"; reason: string };

export interface OrderRecord {
  id: string;
  amount: number;
  currency: string;
  status: string;
  [field: string]: unknown;
}

export interface CallRef {
  agent_id: string;
  key: string;
  reservation_id: string;
  /** Set when the call was forwarded after an operator approved its HOLD. */
  approval_id?: string;
  /** The reservation's block, when the caller has the reservation at hand (a reservation never
   *  changes block): its lock is taken first and the reservation is read once, under it. */
  block_id?: string;
}

export interface Completion {
  reservation: ReservationRow;
  /** The block as this transaction left it, so the caller needs no second read. */
  block: BlockRow;
  result: Record<string, unknown>;
  evidence?: EvidenceRef;
}

interface Locked {
  /** Read under its block's lock. */
  reservation: ReservationRow;
  /** The block as locked, before this transaction changed it. */
  block: BlockRow;
}

/** Locks the reservation's block, then reads the reservation under that lock (under READ
 *  COMMITTED a read taken before the lock may predate another writer). */
async function loadLocked(tx: SqlTx, call: CallRef): Promise<Locked> {
  const { reservation_id } = call;
  const block_id = call.block_id ?? (await getReservation(tx, reservation_id))?.block_id;
  if (block_id === undefined) throw new Error(`reservation ${reservation_id} not found`);
  const block = await lockBlock(tx, block_id);
  const reservation = await getReservation(tx, reservation_id);
  if (!block || !reservation) throw new Error(`reservation ${reservation_id} or its block ${block_id} not found`);
  if (reservation.block_id !== block_id) throw new Error(`reservation ${reservation_id} is not on block ${block_id}`);
  return { reservation, block };
}

async function storeOutcome(tx: SqlTx, call: CallRef, result: Record<string, unknown>, keep: boolean): Promise<void> {
  // An approved call's outcome is its approval's result: a replay of its key answers with it
  // (DESIGN.md), a provider's refusal included.
  if (call.approval_id) return finishApproval(tx, call.approval_id, result);
  // Only this call's own row is stored or dropped: an answer that comes late (after a check
  // released the hold and the key was used for a new call) must not touch the new call's row.
  if (keep) return storeResult(tx, call.agent_id, call.key, result, call.reservation_id);
  // A refusal is not stored: the same call is simply decided again.
  return dropIdempotency(tx, call.agent_id, call.key, call.reservation_id);
}

/** Names an order on its reservation (params: order id, now, then the WHERE's): a held one's
 *  creation is known from then on, whatever marked it unknown (its lease ran out first). Not a
 *  capture's unknown outcome, which a bound payment shows (one is bound only once the order is
 *  known): a late answer to the creation must not take that capture out of the inbox. */
const name_order_sql = `UPDATE reservations SET order_id = ?, updated_at_ms = ?, order_made_by = ?,
     outcome_unknown = CASE WHEN status = 'held' AND payment_id IS NULL THEN 0 ELSE outcome_unknown END,
     unknown_reason = CASE WHEN status = 'held' AND payment_id IS NULL THEN NULL ELSE unknown_reason END`;

/** What a caller whose order another reservation has is told: no ids of that reservation's. */
export const order_taken_told = "the provider answered with an order another reservation already has; whether it made one for this call is unknown";

/**
 * Why an order the provider answered with cannot be named on `reservation_id`: another
 * reservation already has it (a broken or hostile provider answered one call with another's
 * order). Undefined when no other reservation names it.
 */
async function orderTaken(tx: SqlTx, order_id: string, reservation_id: string): Promise<{ owner: string; reason: string } | undefined> {
  const owner = await reservationByOrder(tx, order_id);
  if (!owner || owner.reservation_id === reservation_id) return undefined;
  return { owner: owner.reservation_id, reason: `the provider answered with order ${order_id}, which reservation ${owner.reservation_id} already has` };
}

export async function completeOrder(
  tx: SqlTx,
  context: LedgerContext,
  call: CallRef,
  answered: ForwardOutcome<OrderRecord>,
): Promise<Completion> {
  const locked = await loadLocked(tx, call);
  const reservation = locked.reservation;
  const now_ms = context.clock().getTime();
  // An order another reservation has is not named here (nor taken from it): the answer proves
  // nothing about this call's order, whose outcome is unknown, and its entry records the answer.
  const taken = answered.kind === "ok" ? await orderTaken(tx, answered.value.id, reservation.reservation_id) : undefined;
  const outcome: ForwardOutcome<OrderRecord> = taken ? { kind: "unknown", reason: taken.reason } : answered;
  // The caller is told no other reservation's ids (the inbox and the entry name them).
  const told = taken ? order_taken_told : outcome.kind === "unknown" ? outcome.reason : "";
  let result: Record<string, unknown>;
  // An order the provider created only names it on the reservation: the block stays as locked.
  let left: { reservation: ReservationRow; block: BlockRow } | undefined;
  if (outcome.kind === "ok") {
    // The order exists: an outcome marked unknown meanwhile (the lease ran out first) is known now.
    const updated = await tx.get<ReservationRow>(`${name_order_sql} WHERE reservation_id = ? RETURNING *`, [outcome.value.id, now_ms, context.order_made_by ?? null, reservation.reservation_id]);
    left = { reservation: updated as ReservationRow, block: locked.block };
    if (reservation.status === "released") {
      // Made after a check proved no order and released the hold (the call stalled past its
      // lease): named on its reservation, so a capture of it anywhere is a late capture (a
      // conflict), and answered as unusable. The key went with the hold; an approval keeps its
      // recorded outcome.
      result = { provider: "late_order", order: outcome.value, reservation_id: reservation.reservation_id, reason: `the hold was released first: ${reservation.release_reason ?? "released"}` };
    } else {
      result = { order: outcome.value, reservation_id: reservation.reservation_id };
      await storeOutcome(tx, call, result, true);
    }
  } else if (outcome.kind === "refused") {
    await releaseHold(tx, context, reservation, `provider refused the order: ${outcome.error.description}`);
    result = { provider: "refused", status: outcome.status, error: outcome.error, reservation_id: reservation.reservation_id };
    await storeOutcome(tx, call, result, false);
  } else if (reservation.order_id !== null) {
    // A check or a webhook found the order by its receipt while this call waited on the provider
    // (orderFound stored it for this call's key): the outcome is known, whatever this answer says.
    result = { provider: "unknown", reservation_id: reservation.reservation_id, reason: told, order_id: reservation.order_id };
  } else if (reservation.status === "released") {
    // Unanswered after a check proved no order and released the hold (the call stalled past its
    // lease): nothing is held for it and its key went with the hold. An order the provider made
    // late would be named by its receipt and captured only as a conflict.
    const reason = `${told}; the hold was released first: ${reservation.release_reason ?? "released"}`;
    result = { provider: "unknown", reservation_id: reservation.reservation_id, reason, released: true };
  } else {
    await markUnknown(tx, context, reservation, outcome.reason);
    result = { provider: "unknown", reservation_id: reservation.reservation_id, reason: told };
    await storeOutcome(tx, call, result, true);
  }
  const evidence = await record(tx, context, "gate.settlement", {
    action: taken ? "order.taken" : result.provider === "late_order" ? "order.after_release" : `order.${outcome.kind}`,
    agent_id: call.agent_id,
    block_id: locked.block.block_id,
    approval_id: call.approval_id ?? null,
    ...result,
    ...(taken && answered.kind === "ok" ? { answered: answered.value, taken_by: taken.owner, taken_reason: taken.reason } : {}),
  });
  // The block is locked since loadLocked: the rows as this transaction leaves them.
  left ??= {
    reservation: (await getReservation(tx, reservation.reservation_id)) as ReservationRow,
    block: (await lockBlock(tx, reservation.block_id)) as BlockRow,
  };
  const completion: Completion = { reservation: left.reservation, block: left.block, result };
  if (evidence) completion.evidence = evidence;
  return completion;
}

/**
 * An order whose creation's answer was lost, found again by its receipt (an operator check, a
 * webhook): named on its reservation, whose outcome is known from now on (it leaves the inbox;
 * the money stays held for the order's payment), and stored for the call that asked for it, so
 * that its key, or its approval, answers with the order instead of "unknown" (and a derived key
 * stops replaying once its five minutes are over). The caller holds the block's lock. Returns
 * false when the reservation already names an order, or when another reservation has this one:
 * it is then not named, its entry (`order.taken`) records the answer, and the reservation is
 * marked outcome-unknown with a reason that names that other reservation.
 */
export async function orderFound(tx: SqlTx, context: LedgerContext, reservation_id: string, order: OrderRecord): Promise<boolean> {
  const reservation = await getReservation(tx, reservation_id);
  if (!reservation || reservation.order_id !== null) return false;
  const taken = await orderTaken(tx, order.id, reservation_id);
  if (taken) {
    // Not named (another reservation has it): the answer is recorded, and the reservation, still
    // without a known order, goes to the inbox saying why.
    await markUnknown(tx, context, reservation, taken.reason);
    await record(tx, context, "gate.settlement", { action: "order.taken", reservation_id, block_id: reservation.block_id, order_id: order.id, taken_by: taken.owner, reason: taken.reason, answered: order });
    return false;
  }
  const linked = await tx.run(`${name_order_sql} WHERE reservation_id = ? AND order_id IS NULL`, [order.id, context.clock().getTime(), context.order_made_by ?? null, reservation_id]);
  if (linked.changes !== 1) return false;
  const result = { order, reservation_id };
  // A key still in flight gets the order too: its call, still waiting on the provider, may yet
  // hear nothing (completeOrder then leaves the order in place).
  await completeKeys(tx, reservation_id, "create_order", result);
  const approval = await approvalByReservation(tx, reservation_id);
  if (approval) await finishApproval(tx, approval.approval_id, result);
  await record(tx, context, "gate.settlement", { action: "order.linked", reservation_id, block_id: reservation.block_id, order_id: order.id });
  return true;
}

/**
 * How long after an order's creation went unanswered (its outcome marked unknown) a receipt
 * lookup that finds no order proves that none was made. A creation still on its way lands within
 * the provider timeout, seconds; the wait also covers a provider search that lags its writes.
 */
export const order_absent_after_ms = 10 * 60_000;

/** The release reason orderAbsent writes, by which a webhook knows such a reservation may yet own
 *  an order made late (src/gate/webhooks.ts). */
export const order_absent_reason = `the provider has no order for this reservation ${order_absent_after_ms / 60_000} minutes or more after its creation went unanswered`;

/** How long after such a release a webhook about an order Bursar does not know still asks the
 *  provider whether the order is that reservation's: an authorization not captured within days
 *  is refunded by the provider, so a capture of a late order comes well within this. */
export const order_absent_watch_ms = 30 * 24 * 3600_000;

export type AbsentOutcome = { kind: "released"; reason: string } | { kind: "kept"; reason: string; release_from_ms?: number };

/**
 * The provider has answered a lookup by this reservation's receipt with no order. Once the
 * creation's outcome has been unknown for order_absent_after_ms, with no call on it still
 * waiting for the provider, that is proof the order was never made: the hold is released with
 * evidence, the call's key is dropped (as after a refusal, the same call is decided again) and
 * an approval it forwarded records the outcome. A late order on that receipt can never be
 * captured through the gate (its reservation is released), and a capture made elsewhere is a
 * conflict, as for any released reservation. Before then, or while a call may still land, the
 * hold is kept; `release_from_ms` says when a check may release it. The caller holds the
 * reservation's block lock.
 */
export async function orderAbsent(tx: SqlTx, context: LedgerContext, reservation_id: string): Promise<AbsentOutcome> {
  const reservation = await getReservation(tx, reservation_id);
  if (!reservation || reservation.status !== "held") return { kind: "kept", reason: `the reservation is ${reservation?.status ?? "gone"}` };
  if (reservation.order_id !== null) return { kind: "kept", reason: `the reservation names order ${reservation.order_id}` };
  const approval = await approvalByReservation(tx, reservation_id);
  if (approval?.state === "pending") return { kind: "kept", reason: "its order waits for an operator's approval and was never sent" };
  const now_ms = context.clock().getTime();
  const waiting = approval?.state === "forwarding" || (await keyInFlightOn(tx, reservation_id, { any_tool: true, lease_after_ms: now_ms }));
  if (!reservation.outcome_unknown || waiting) return { kind: "kept", reason: "its order's creation is still waiting for the provider's answer" };
  const release_from_ms = reservation.updated_at_ms + order_absent_after_ms;
  if (now_ms < release_from_ms) {
    return { kind: "kept", reason: `a check releases the hold once the creation has gone unanswered for ${order_absent_after_ms / 60_000} minutes`, release_from_ms };
  }
  await releaseWithoutOrder(tx, context, reservation, approval, order_absent_reason);
  return { kind: "released", reason: order_absent_reason };
}

/**
 * Releases a hold no order stands for (never made, or lost with the simulator that made it): the
 * call's create_order key is dropped (as after a refusal, the same call is decided again) and an
 * approval whose forwarding went unanswered records that no order stands.
 */
export async function releaseWithoutOrder(tx: SqlTx, context: LedgerContext, reservation: ReservationRow, approval: ApprovalRow | undefined, reason: string): Promise<void> {
  const { reservation_id } = reservation;
  await releaseHold(tx, context, reservation, reason);
  await tx.run("DELETE FROM idempotency_keys WHERE reservation_id = ? AND tool = 'create_order'", [reservation_id]);
  if (approval) await finishApproval(tx, approval.approval_id, { provider: "no_order", reservation_id, reason });
}

/** The capture call got a captured payment back: settle through the same path as a webhook. */
export async function completeCapture(
  tx: SqlTx,
  context: LedgerContext,
  call: CallRef,
  payment: CapturedPayment,
): Promise<SettleOutcome & { result: Record<string, unknown>; block: BlockRow }> {
  const settled = await settleCapture(tx, context, payment, "capture");
  // A webhook or check settled it first: the capture's own answer is still evidence.
  if (settled.outcome === "noop") {
    settled.evidence = await record(tx, context, "gate.settlement", {
      action: "capture.duplicate",
      via: "capture",
      reservation_id: call.reservation_id,
      ...(settled.block_id === undefined ? {} : { block_id: settled.block_id }),
      payment,
      reason: settled.reason,
    });
  }
  // A conflict is stored as one, so that the key replays the conflict rather than a capture.
  const result: Record<string, unknown> =
    settled.outcome === "rejected"
      ? { payment, reservation_id: call.reservation_id, reconciliation: "rejected", reason: settled.reason }
      : { payment, reservation_id: call.reservation_id };
  // If the webhook won the race it already completed this key; storing again is harmless.
  await storeResult(tx, call.agent_id, call.key, result, call.reservation_id);
  const reservation = (await getReservation(tx, call.reservation_id)) as ReservationRow;
  return { ...settled, result, block: (await lockBlock(tx, reservation.block_id)) as BlockRow };
}

/** The payment a webhook or check settled this call's reservation with, having completed its key; else undefined. */
async function settledMeanwhile(tx: SqlTx, call: CallRef, reservation: ReservationRow): Promise<CapturedPayment | undefined> {
  if (reservation.status !== "committed") return undefined;
  const stored = await getIdempotency(tx, call.agent_id, call.key);
  const result = stored?.status === "stored" && stored.result_json ? (JSON.parse(stored.result_json) as { payment?: CapturedPayment }) : {};
  return result.payment;
}

export type AbandonOutcome = { kind: "abandoned" } | { kind: "settled"; payment: CapturedPayment; block: BlockRow };

/**
 * The capture failed and the payment is not captured: nothing moved, so the key is dropped and
 * the agent may try again. Its entry says which failure: `capture.refused` when the provider
 * refused it, `capture.unanswered` after a timeout, reset or 5xx (the capture may still land:
 * the reservation is then marked outcome-unknown, for the operator's inbox).
 * Unless a webhook settled the payment meanwhile (the capture landed
 * after all): that completed the key, which stays and is what the agent hears. The payment is
 * unbound too (so another may be captured instead) when `unbind` says the failed capture cannot
 * land later, unless another capture of that payment may still land (in flight, or its outcome
 * unknown since its lease ran out): the binding then stays, so no second payment can be
 * captured on the reservation meanwhile.
 */
export async function abandonCapture(
  tx: SqlTx,
  context: LedgerContext,
  call: CallRef,
  payment: { payment_id: string; unbind: boolean; refused: boolean },
  reason: string,
): Promise<AbandonOutcome> {
  const { reservation, block } = await loadLocked(tx, call);
  const settled = await settledMeanwhile(tx, call, reservation);
  if (settled) return { kind: "settled", payment: settled, block };
  const unbind =
    payment.unbind &&
    reservation.status === "held" &&
    reservation.payment_id === payment.payment_id &&
    !reservation.outcome_unknown &&
    !(await keyInFlightOn(tx, call.reservation_id, { except: { agent_id: call.agent_id, key: call.key }, any_tool: true }));
  if (unbind) {
    await tx.run("UPDATE reservations SET payment_id = NULL, updated_at_ms = ? WHERE reservation_id = ?", [context.clock().getTime(), reservation.reservation_id]);
  }
  // No definite answer, and the payment still bound: the capture may still land. Should its
  // webhooks be lost too, only the agent's next capture or a check would ever settle it, so the
  // reservation goes to the operator's inbox (outcome unknown), as any unanswered call's does; its
  // landing, or a check once it has stayed uncaptured for capture_unlanded_after_ms, clears it.
  const may_land = !payment.unbind && reservation.status === "held" && reservation.payment_id === payment.payment_id;
  if (may_land) {
    const unknown_reason = `the capture of payment ${payment.payment_id} got no definite answer and may still land (${reason}): a check settles it if it did`;
    await flagOutcomeUnknown(tx, reservation.reservation_id, unknown_reason, context.clock().getTime());
  }
  // This call's own row only, as for a refused order (storeOutcome).
  await dropIdempotency(tx, call.agent_id, call.key, call.reservation_id);
  const action = payment.refused ? "capture.refused" : "capture.unanswered";
  await record(tx, context, "gate.settlement", {
    action,
    reservation_id: reservation.reservation_id,
    block_id: reservation.block_id,
    payment_id: payment.payment_id,
    reason,
    payment_unbound: unbind,
    ...(may_land ? { outcome_unknown: true } : {}),
  });
  return { kind: "abandoned" };
}

/** Who found the bound payment dead: an operator's reservation check, or an agent's capture decision. */
export type UnbindVia = "check" | "capture";

/**
 * The provider reports the payment bound to a held reservation in a final state without a
 * capture (failed, or refunded before any capture: Razorpay refunds an authorization not
 * captured in time), so no capture of it can land any more: it is unbound, and another payment
 * on the order may be captured, instead of the hold staying bound to a dead payment for good.
 * The caller proved that state (the gate's `cannotBeCaptured`). As in abandonCapture, the binding
 * stays while a capture of the reservation is in flight: that capture's own re-fetch settles what
 * it did. A capture whose outcome was unknown (the reservation outcome-unknown, its key replaying
 * "unknown") is resolved: it was of this payment, which no capture can land on any more, so it
 * moved nothing; the reservation leaves the inbox and that key is dropped, so the agent may
 * capture again. Without that, nothing but a capture landing could ever clear the flag, and the
 * hold stayed bound to a dead payment for good. Returns whether it unbound.
 */
export async function unbindUncapturable(
  tx: SqlTx,
  context: LedgerContext,
  reservation_id: string,
  payment: { id: string; status: string },
  via: UnbindVia,
): Promise<boolean> {
  if (payment.status !== "failed" && payment.status !== "refunded") {
    throw new Error(`unbindUncapturable: a ${payment.status} payment may still be captured`);
  }
  const block_id = (await getReservation(tx, reservation_id))?.block_id;
  if (block_id === undefined) return false;
  // The block lock comes before any write to its reservations; the reservation is read under it,
  // once a capture whose lease ran out is marked unknown (else a later sweep would mark it so).
  await lockBlock(tx, block_id);
  await expireLeasesOfBlock(tx, context, block_id);
  const reservation = (await getReservation(tx, reservation_id)) as ReservationRow;
  if (reservation.status !== "held" || reservation.payment_id !== payment.id) return false;
  if (await keyInFlightOn(tx, reservation_id)) return false;
  await tx.run("UPDATE reservations SET payment_id = NULL, outcome_unknown = 0, unknown_reason = NULL, updated_at_ms = ? WHERE reservation_id = ?", [
    context.clock().getTime(),
    reservation_id,
  ]);
  // Every capture key still replaying "unknown" is withdrawn, whether or not the flag is still set
  // (a late order answer clears it, for one).
  const resolved = await dropUnknownKeys(tx, reservation_id, "capture_payment");
  await record(tx, context, "gate.settlement", {
    action: "payment.unbound",
    via,
    reservation_id,
    block_id,
    payment_id: payment.id,
    payment_status: payment.status,
    reason: `the provider reports the bound payment ${payment.status}: it can no longer be captured`,
    ...(reservation.outcome_unknown || resolved > 0 ? { outcome_resolved: { was: reservation.unknown_reason, capture_keys_dropped: resolved } } : {}),
  });
  return true;
}

/** How long a capture's outcome must have been unknown before its bound payment, still
 *  authorized, proves it did not land: as for an order's creation (order_absent_after_ms), a
 *  capture on its way lands within the provider timeout, seconds. */
export const capture_unlanded_after_ms = order_absent_after_ms;

export type UnlandedOutcome = { kind: "resolved" } | { kind: "kept"; resolve_from_ms?: number };

/**
 * An operator's check found the payment bound to a held, outcome-unknown reservation still
 * `authorized`, with no capture of the reservation in flight (every lease has run out) and the
 * outcome unknown for capture_unlanded_after_ms: the capture whose outcome was unknown (its
 * process killed before or while asking the provider, or its request lost) did not land. The flag
 * is cleared and every capture key replaying "unknown" dropped, so the agent may capture again;
 * without this, its key replayed "unknown" (telling it an operator would reconcile) until the
 * authorization lapsed and the purchase was lost. The binding stays: should that capture land
 * after all, its webhook, the check or the agent's next capture settles it on this reservation.
 * Before then, `resolve_from_ms` says when a check may resolve it.
 */
export async function resolveUnlandedCapture(
  tx: SqlTx,
  context: LedgerContext,
  reservation_id: string,
  payment: { id: string; status: string; captured?: boolean },
): Promise<UnlandedOutcome> {
  if (payment.status !== "authorized" || payment.captured === true) throw new Error(`resolveUnlandedCapture: a ${payment.status} payment is no proof that no capture landed`);
  const block_id = (await getReservation(tx, reservation_id))?.block_id;
  if (block_id === undefined) return { kind: "kept" };
  // As in unbindUncapturable: the block lock first, then any capture whose lease ran out marked unknown.
  await lockBlock(tx, block_id);
  await expireLeasesOfBlock(tx, context, block_id);
  const reservation = (await getReservation(tx, reservation_id)) as ReservationRow;
  if (reservation.status !== "held" || reservation.payment_id !== payment.id || !reservation.outcome_unknown) return { kind: "kept" };
  if (await keyInFlightOn(tx, reservation_id, { any_tool: true })) return { kind: "kept" };
  const resolve_from_ms = reservation.updated_at_ms + capture_unlanded_after_ms;
  if (context.clock().getTime() < resolve_from_ms) return { kind: "kept", resolve_from_ms };
  await tx.run("UPDATE reservations SET outcome_unknown = 0, unknown_reason = NULL, updated_at_ms = ? WHERE reservation_id = ?", [context.clock().getTime(), reservation_id]);
  const dropped = await dropUnknownKeys(tx, reservation_id, "capture_payment");
  await record(tx, context, "gate.settlement", {
    action: "capture.unlanded",
    via: "check",
    reservation_id,
    block_id,
    payment_id: payment.id,
    payment_status: payment.status,
    reason: `the provider reports the bound payment still authorized ${capture_unlanded_after_ms / 60_000} minutes or more after its capture went unanswered, and none is in flight: that capture moved nothing`,
    outcome_resolved: { was: reservation.unknown_reason, capture_keys_dropped: dropped },
  });
  return { kind: "resolved" };
}

export type CaptureUnknownOutcome =
  | { kind: "unknown"; result: Record<string, unknown> }
  | { kind: "settled"; payment: CapturedPayment; block: BlockRow };

/**
 * The capture's outcome is unknown (provider and re-fetch both failed): money stays held. Unless
 * a webhook or an operator check settled the payment meanwhile: that also completed this key
 * with the payment, which is then what the agent hears and what the key replays.
 */
export async function captureUnknown(tx: SqlTx, context: LedgerContext, call: CallRef, reason: string): Promise<CaptureUnknownOutcome> {
  const { reservation, block } = await loadLocked(tx, call);
  const settled = await settledMeanwhile(tx, call, reservation);
  if (settled) return { kind: "settled", payment: settled, block };
  // Its key gone: an unbinding resolved this capture meanwhile (its payment can no longer be
  // captured, so it moved nothing), and the reservation is not marked unknown again.
  if ((await getIdempotency(tx, call.agent_id, call.key))?.reservation_id !== call.reservation_id) {
    const resolved = `${reason}; meanwhile the provider reported the payment can no longer be captured, so this capture moved nothing: repeat the call to have it decided afresh`;
    return { kind: "unknown", result: { provider: "unknown", reservation_id: reservation.reservation_id, reason: resolved } };
  }
  await markUnknown(tx, context, reservation, reason);
  const result = { provider: "unknown", reservation_id: reservation.reservation_id, reason };
  await storeResult(tx, call.agent_id, call.key, result, call.reservation_id);
  return { kind: "unknown", result };
}
