// Moving held money: commit on a proven capture (exactly once per reservation), release on a
// proven refusal, mark outcome-unknown otherwise. Conflicts freeze the block and keep the money.

import { unreconciled_max_minor } from "../policy/limits.js";
import { record, type EvidenceRef, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import type { BlockRow, ReservationRow } from "./rows.js";
import {
  adjustBlock,
  approvalByReservation,
  completeKeys,
  flagOutcomeUnknown,
  freezeBlock,
  getReservation,
  lockBlock,
  lockedReservation,
  reservationByOrder,
  reservationByPayment,
} from "./statements.js";

export interface CapturedPayment {
  id: string;
  order_id: string;
  amount: number;
  currency: string;
  status: string;
  /** The provider's `captured` flag, carried for a refunded payment: true when it was captured before its refund. */
  captured?: boolean;
}

/**
 * Whether the provider reports the payment's money as moved: captured, or captured and refunded
 * since (Razorpay then reads `refunded` with `captured: true`). A refund gives nothing back to
 * the block; the capture is settled as any other.
 */
export function isCapture(payment: { status: string; captured?: boolean }): boolean {
  return payment.status === "captured" || (payment.status === "refunded" && payment.captured === true);
}

export type SettleVia = "capture" | "webhook" | "check";

export interface SettleOutcome {
  outcome: "applied" | "noop" | "rejected";
  reason: string;
  reservation_id?: string;
  block_id?: string;
  evidence?: EvidenceRef;
}

export async function releaseHold(
  tx: SqlTx,
  context: LedgerContext,
  reservation: ReservationRow,
  reason: string,
): Promise<boolean> {
  const now_ms = context.clock().getTime();
  const result = await tx.run(
    "UPDATE reservations SET status = 'released', release_reason = ?, updated_at_ms = ? WHERE reservation_id = ? AND status = 'held'",
    [reason, now_ms, reservation.reservation_id],
  );
  if (result.changes !== 1) return false;
  await adjustBlock(tx, reservation.block_id, { held: -reservation.amount });
  await record(tx, context, "gate.settlement", {
    action: "release",
    reservation_id: reservation.reservation_id,
    block_id: reservation.block_id,
    amount: reservation.amount,
    currency: reservation.currency,
    reason,
  });
  return true;
}

export async function markUnknown(
  tx: SqlTx,
  context: LedgerContext,
  reservation: ReservationRow,
  reason: string,
): Promise<void> {
  // Only money still held can have an unknown outcome; a settled or released one is known.
  if (!(await flagOutcomeUnknown(tx, reservation.reservation_id, reason, context.clock().getTime()))) return;
  await record(tx, context, "gate.settlement", {
    action: "outcome_unknown",
    reservation_id: reservation.reservation_id,
    block_id: reservation.block_id,
    amount: reservation.amount,
    currency: reservation.currency,
    reason,
  });
}

/**
 * Counts a conflicting payment's money as unreconciled on the block, once per payment id: the
 * provider reports one capture several times (payment.captured and order.paid, redeliveries
 * under new event ids, the capture's answer, operator checks). A later report that says more
 * moved, in the same currency, raises the count to it: the ledger keeps the most any report said
 * moved. `amount` is what this report says moved beyond what the block counts already (the
 * payment's amount, or for a settled payment reported larger, the excess over its spend).
 * Answers the amount added to the block's unreconciled sum; `counted_before` when the payment
 * was counted on this reservation, in this currency, at as much or more; `elsewhere` when it is
 * counted on another reservation or in another currency, so that this report cannot be weighed
 * against that count (reject treats it as a conflict that moved no money here).
 *
 * A block counts at most unreconciled_max_minor: a provider reporting more (a payment amount
 * can be up to 2^53, and every conflicting payment adds its own) would take the block's sums
 * past what a JavaScript number holds exactly, and PostgreSQL's BIGINT past what Bursar reads
 * back. Beyond it, a payment is counted only up to the bound, and its row says what was counted,
 * which is what leaves again if it settles; the entry keeps the payment as reported. At the
 * bound a block has nothing available, so what no longer adds to it is judged as a report
 * counted before: a larger report of a counted payment does not freeze the block again, and a
 * payment first reported there is counted at 0, so the same report adds money, and freezes the
 * block, once settling has made room.
 */
async function countUnreconciled(
  tx: SqlTx,
  block: BlockRow,
  reservation: ReservationRow,
  payment: CapturedPayment,
  reason: string,
  now_ms: number,
  reported = payment.amount,
): Promise<number | "counted_before" | "elsewhere"> {
  const before = await tx.get<{ amount: number | string; currency: string; reservation_id: string }>(
    "SELECT amount, currency, reservation_id FROM unreconciled_payments WHERE payment_id = ?",
    [payment.id],
  );
  // Raised only on the reservation (and so the block) it was counted on, in its currency.
  if (before && (before.reservation_id !== reservation.reservation_id || before.currency !== payment.currency)) return "elsewhere";
  const was = before ? Number(before.amount) : 0;
  // A payment in another currency adds nothing to the block's sums, so no bound applies to it.
  const same_currency = payment.currency === reservation.currency;
  const amount = same_currency ? Math.min(reported, was + Math.max(0, unreconciled_max_minor - block.unreconciled)) : reported;
  if (before && amount <= was) return "counted_before";
  if (before) {
    await tx.run("UPDATE unreconciled_payments SET amount = ?, reason = ?, counted_at_ms = ? WHERE payment_id = ?", [amount, reason, now_ms, payment.id]);
  } else {
    const inserted = await tx.run(
      `INSERT INTO unreconciled_payments (payment_id, reservation_id, block_id, amount, currency, reason, counted_at_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payment_id) DO NOTHING`,
      [payment.id, reservation.reservation_id, reservation.block_id, amount, payment.currency, reason, now_ms],
    );
    // Inserted meanwhile by another reservation's report (its block lock is not this one).
    if (inserted.changes !== 1) return "elsewhere";
  }
  // The block counts in its own currency's minor units: a payment in another is listed (with its
  // currency) and freezes the block, but adds nothing to its sums (USD cents are not paise).
  const added = same_currency ? amount - was : 0;
  if (added > 0) await adjustBlock(tx, reservation.block_id, { unreconciled: added });
  return added;
}

/**
 * A payment counted as unreconciled on this reservation that now settles it (it was captured
 * while another payment was bound, which has since been unbound as one that can no longer be
 * captured): its money is spent now, so it leaves unreconciled, or it would be counted twice.
 * Only as much leaves as is now spent: when the provider reported it before with a larger amount,
 * the difference stays unreconciled (the ledger keeps the most any report said moved), and the
 * block freezes for an operator to look at what is left unexplained. (Reported before with a
 * smaller amount, all of it leaves and the larger is spent: nothing is left to explain.)
 * Returns the amounts moved out of unreconciled and left in it, if it was counted.
 */
async function uncountUnreconciled(tx: SqlTx, reservation: ReservationRow, payment: CapturedPayment, now_ms: number): Promise<{ moved: number; left: number } | undefined> {
  const counted = await tx.get<{ amount: number | string; currency: string }>(
    "SELECT amount, currency FROM unreconciled_payments WHERE payment_id = ? AND reservation_id = ?",
    [payment.id, reservation.reservation_id],
  );
  if (!counted) return undefined;
  // One in another currency was never added to the block's sums (countUnreconciled).
  const was = counted.currency === reservation.currency ? Number(counted.amount) : 0;
  const moved = Math.min(was, payment.amount);
  if (was > moved) {
    await tx.run("UPDATE unreconciled_payments SET amount = ? WHERE payment_id = ?", [was - moved, payment.id]);
    await freezeBlock(tx, reservation.block_id, `payment ${payment.id} was counted unreconciled for ${was} and now settles for ${payment.amount}: ${was - moved} stays unreconciled`, now_ms);
  } else {
    await tx.run("DELETE FROM unreconciled_payments WHERE payment_id = ?", [payment.id]);
  }
  await adjustBlock(tx, reservation.block_id, { unreconciled: -moved });
  return { moved, left: was - moved };
}

/**
 * Notes a conflict that moved no money, as the report read: false when the same report (payment,
 * reservation, reason, status, amount, currency) was noted before.
 */
async function noteConflict(tx: SqlTx, reservation: ReservationRow, payment: CapturedPayment, reason: string, now_ms: number): Promise<boolean> {
  const noted = await tx.run(
    `INSERT INTO conflict_reports (payment_id, reservation_id, reason, status, amount, currency, reported_at_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    [payment.id, reservation.reservation_id, reason, payment.status, payment.amount, payment.currency, now_ms],
  );
  return noted.changes === 1;
}

async function reject(
  tx: SqlTx,
  context: LedgerContext,
  reservation: ReservationRow,
  payment: CapturedPayment,
  via: SettleVia,
  reason: string,
  money_moved: boolean,
  detail: Record<string, unknown>,
  moved_amount = payment.amount,
): Promise<SettleOutcome> {
  const now_ms = context.clock().getTime();
  const block = (await lockBlock(tx, reservation.block_id)) as BlockRow;
  const counted = money_moved ? await countUnreconciled(tx, block, reservation, payment, reason, now_ms, moved_amount) : undefined;
  const unreconciled = typeof counted === "number" ? counted : 0;
  // The same conflicting payment again (Razorpay sends payment.captured and order.paid for one
  // capture, and retries for a day): it froze the block when first counted, and freezing again
  // would undo an operator's unfreeze given after reviewing it. So for the same report of a
  // conflict that moved no money (here: one counted elsewhere moved none this block counts).
  const already_counted = counted === "counted_before";
  const already_reported = (!money_moved || counted === "elsewhere") && !(await noteConflict(tx, reservation, payment, reason, now_ms));
  const freezes = !already_counted && !already_reported;
  if (freezes) await freezeBlock(tx, reservation.block_id, reason, now_ms);
  const evidence = await record(tx, context, "gate.settlement", {
    action: "reject",
    via,
    reservation_id: reservation.reservation_id,
    block_id: reservation.block_id,
    payment,
    unreconciled,
    // Whether this reject froze the block: false when it did not freeze it (a report counted or
    // noted before) or the block was frozen already (its earlier reason kept).
    froze: freezes && block.frozen_at_ms === null,
    ...(already_counted ? { already_counted: true } : {}),
    ...(already_reported ? { already_reported: true } : {}),
    reason,
    ...detail,
  });
  return { outcome: "rejected", reason, reservation_id: reservation.reservation_id, block_id: reservation.block_id, evidence };
}

async function commit(
  tx: SqlTx,
  context: LedgerContext,
  reservation: ReservationRow,
  payment: CapturedPayment,
  via: SettleVia,
  detail: Record<string, unknown>,
): Promise<SettleOutcome> {
  const now_ms = context.clock().getTime();
  const block = (await lockBlock(tx, reservation.block_id)) as BlockRow;
  const result = await tx.run(
    `UPDATE reservations SET status = 'committed', payment_id = ?, captured_amount = ?, updated_at_ms = ?, outcome_unknown = 0
     WHERE reservation_id = ? AND status = 'held'`,
    [payment.id, payment.amount, now_ms, reservation.reservation_id],
  );
  if (result.changes !== 1) throw new Error(`reservation ${reservation.reservation_id} changed under its block lock`);
  await adjustBlock(tx, reservation.block_id, { held: -reservation.amount, spent: payment.amount });
  // Only a block with unreconciled money can hold this payment among it.
  const reconciled = block.unreconciled > 0 ? await uncountUnreconciled(tx, reservation, payment, now_ms) : undefined;
  // A capture key in flight, or one whose capture went unanswered, now replays the settled payment.
  await completeKeys(tx, reservation.reservation_id, "capture_payment", { payment, reservation_id: reservation.reservation_id });
  const evidence = await record(tx, context, "gate.settlement", {
    action: "commit",
    via,
    reservation_id: reservation.reservation_id,
    block_id: reservation.block_id,
    payment,
    released_remainder: reservation.amount - payment.amount,
    ...(reconciled === undefined ? {} : { reconciled: reconciled.moved }),
    // What a larger earlier report left unreconciled, for which the block froze again (froze:
    // false when it was frozen already, its earlier reason kept).
    ...(reconciled && reconciled.left > 0 ? { unreconciled_left: reconciled.left, froze: block.frozen_at_ms === null } : {}),
    ...detail,
  });
  return { outcome: "applied", reason: "captured", reservation_id: reservation.reservation_id, block_id: reservation.block_id, evidence };
}

/**
 * Applies a capture the provider proved (by a signed webhook, the capture call's answer, or an
 * operator check). Idempotent on the payment id: the same payment on the same reservation is a
 * no-op whatever path or event id brings it.
 */
export async function settleCapture(
  tx: SqlTx,
  context: LedgerContext,
  payment: CapturedPayment,
  via: SettleVia,
  detail: Record<string, unknown> = {},
): Promise<SettleOutcome> {
  const found = await reservationByOrder(tx, payment.order_id);
  if (!found) return { outcome: "noop", reason: "no reservation for this order" };
  await lockBlock(tx, found.block_id);
  const reservation = (await getReservation(tx, found.reservation_id)) as ReservationRow;
  if (!isCapture(payment)) {
    return reject(tx, context, reservation, payment, via, `payment status ${payment.status} conflicts with a capture`, false, detail);
  }
  const elsewhere = await reservationByPayment(tx, payment.id);
  if (elsewhere && elsewhere.reservation_id !== reservation.reservation_id) {
    return reject(tx, context, reservation, payment, via, "payment reused across reservations", false, detail);
  }
  if (reservation.status === "committed" && reservation.payment_id === payment.id) {
    if (payment.amount === reservation.captured_amount && payment.currency === reservation.currency) {
      return { outcome: "noop", reason: "already settled", reservation_id: reservation.reservation_id, block_id: reservation.block_id };
    }
    // The provider contradicts the capture it reported before, and the block freezes for an
    // operator to look. What it now says moved beyond the spend, in the block's currency, is
    // counted unreconciled; less, or another currency, adds nothing (the spend stays).
    const settled = { amount: reservation.captured_amount, currency: reservation.currency };
    const excess = payment.currency === reservation.currency ? payment.amount - (reservation.captured_amount ?? payment.amount) : 0;
    const reason = "the settled payment is reported again with another amount or currency";
    return reject(tx, context, reservation, payment, via, reason, excess > 0, { ...detail, settled }, excess);
  }
  if (reservation.status === "committed") {
    return reject(tx, context, reservation, payment, via, "a second payment captured on one reservation", true, detail);
  }
  if (reservation.status === "released") {
    return reject(tx, context, reservation, payment, via, "late capture on a released reservation", true, detail);
  }
  // Its order is sent only once an operator approves: a capture on an order naming it before
  // then (found by the receipt) was made by someone else with the provider's keys, not the gate.
  if ((await approvalByReservation(tx, reservation.reservation_id))?.state === "pending") {
    return reject(tx, context, reservation, payment, via, "a capture on an order the gate never sent: the call still waits for an operator's approval", true, detail);
  }
  if (reservation.payment_id && reservation.payment_id !== payment.id) {
    return reject(tx, context, reservation, payment, via, "captured payment differs from the bound payment", true, detail);
  }
  // Orders are made without partial payments, so a capture is for exactly the reservation's
  // amount. One reported for less is a conflict too: committed, it would release the rest to be
  // spent again while the provider may yet report the whole amount moved.
  if (payment.currency !== reservation.currency || payment.amount !== reservation.amount) {
    return reject(tx, context, reservation, payment, via, "captured amount or currency conflicts with the reservation", true, detail);
  }
  return commit(tx, context, reservation, payment, via, detail);
}

/**
 * A conflict found other than by the payment's order (which names no reservation, or another):
 * by the receipt of the payment's order, or by the payment bound to a committed reservation. It
 * is rejected on `reservation_id` exactly as settleCapture rejects one: the block freezes, and a
 * payment the provider reports as captured is counted unreconciled once per payment id.
 */
export async function rejectOnReservation(
  tx: SqlTx,
  context: LedgerContext,
  reservation_id: string,
  payment: CapturedPayment,
  via: SettleVia,
  reason: string,
  detail: Record<string, unknown> = {},
): Promise<SettleOutcome> {
  const reservation = await lockedReservation(tx, reservation_id);
  if (!reservation) throw new Error(`reservation ${reservation_id} not found`);
  return reject(tx, context, reservation, payment, via, reason, isCapture(payment), detail);
}
