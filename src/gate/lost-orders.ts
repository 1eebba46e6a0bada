// Holds on orders the simulator mounted in `bursar serve` lost with an earlier process: it keeps
// orders and payments in memory only, so after a restart nothing can be paid or captured on them.

import type { LedgerContext } from "../ledger/context.js";
import type { SqlTx } from "../ledger/driver.js";
import { releaseWithoutOrder } from "../ledger/complete.js";
import type { ReservationRow } from "../ledger/rows.js";
import { markUnknown } from "../ledger/settle.js";
import { approvalByReservation, dropUnknownKeys, getReservation, keyInFlightOn, lockBlock } from "../ledger/statements.js";
import { expireLeasesOfBlock } from "../ledger/sweep.js";
import type { GateContext } from "./context.js";

/** Why a check releases such a hold: the release entry's and the check's reason. */
export function lostOrderReleaseReason(order_id: string): string {
  return `order ${order_id} was made by the simulator an earlier bursar serve process mounted, which kept it in memory only and so no longer has order ${order_id}: nothing can be paid or captured on it`;
}

/** Why a start marks such a hold outcome-unknown: what the inbox shows until a check releases it. */
export function lostOrderUnknownReason(reservation_id: string, order_id: string): string {
  return `order ${order_id} was made by the simulator mounted in an earlier process, which kept it in memory only: nothing can be paid or captured on it any more; POST /api/v1/reservations/${reservation_id}/check releases the hold`;
}

/** The stamp (reservations.order_made_by) of orders a mounted simulator named: this prefix, then its process's id. */
export const mounted_simulator_stamp_prefix = "mounted_simulator:";

/**
 * Whether the provider's "no such order" for the reservation's order proves the order lost: only
 * for an order another process's mounted simulator named (its stamp, set when the order was
 * named), whatever this process's provider is. That simulator kept the order in memory only, and
 * went with its process: the simulator mounted here, which takes orders only from this process's
 * client and forgets none while it runs, never had it, and no other provider ever had it (a data
 * directory switched to BURSAR_PROVIDER=razorpay). An order a real account or a standalone
 * simulator named, or one named before orders were stamped, proves nothing: it may still exist
 * where it was made, and be paid there.
 */
export function orderLostWithSimulator(context: GateContext, reservation: ReservationRow): boolean {
  const own = context.mounted_simulator?.stamp;
  const made_by = reservation.order_made_by;
  return typeof made_by === "string" && made_by.startsWith(mounted_simulator_stamp_prefix) && made_by !== own;
}

export type LostOutcome = { kind: "released"; reason: string } | { kind: "kept"; reason: string };

/**
 * Releases the hold of a reservation whose order the mounted simulator lost (the caller proved
 * it: orderLostWithSimulator and the simulator's "does not exist"), as a release for want of an
 * order does (orderAbsent): the release entry, the call's create_order key dropped (the same call,
 * repeated, is decided again and creates a new order) and every capture key replaying "unknown"
 * dropped (no capture can land on a lost order). Kept while a call on it is still in flight: its
 * own answer settles what it did first.
 */
export async function releaseLostOrder(tx: SqlTx, context: LedgerContext, reservation_id: string, order_id: string, made_by: string): Promise<LostOutcome> {
  const block_id = (await getReservation(tx, reservation_id))?.block_id;
  if (block_id === undefined) return { kind: "kept", reason: `no reservation ${reservation_id}` };
  // The block lock comes before any write to its reservations; a call whose lease ran out (its
  // process stopped) is marked unknown first, so it no longer counts as in flight.
  await lockBlock(tx, block_id);
  await expireLeasesOfBlock(tx, context, block_id);
  const reservation = (await getReservation(tx, reservation_id)) as ReservationRow;
  if (reservation.status !== "held") return { kind: "kept", reason: `the reservation is ${reservation.status}` };
  if (reservation.order_id !== order_id || reservation.order_made_by !== made_by) return { kind: "kept", reason: `the reservation names order ${String(reservation.order_id)}` };
  const approval = await approvalByReservation(tx, reservation_id);
  if (approval?.state === "forwarding" || (await keyInFlightOn(tx, reservation_id, { any_tool: true }))) {
    return { kind: "kept", reason: `a call on it is still waiting for the provider; check again once it has answered or its lease has run out` };
  }
  const reason = lostOrderReleaseReason(order_id);
  await releaseWithoutOrder(tx, context, reservation, approval, reason);
  // No capture can land on a lost order.
  await dropUnknownKeys(tx, reservation_id, "capture_payment");
  return { kind: "released", reason };
}

interface HeldRow {
  reservation_id: string;
  block_id: string;
}

/** Held reservations marked per page at a start (one transaction each, under its block's lock). */
export const lost_orders_page_max = 100;

/**
 * At every start: every held reservation whose order another process's mounted simulator named
 * (orderLostWithSimulator) names an order no provider of this process can know. Those not yet
 * outcome-unknown are marked so (with evidence), so that GET /api/v1/inbox lists them and the
 * operator can check each (which releases it). Answers how many this start marked. Paged by
 * reservation id, so each page starts past the last; the first three terms are migration 15's
 * index's, written out so that the database sees it applies (nearly every order a real account
 * named is stamped `razorpay` and stays out of it).
 */
export async function markLostOrders(context: GateContext): Promise<number> {
  const own = context.mounted_simulator?.stamp ?? "";
  let marked = 0;
  for (let after = ""; ; ) {
    const rows = await context.ledger.driver.read((tx) =>
      tx.all<HeldRow>(
        `SELECT reservation_id, block_id FROM reservations WHERE status = 'held' AND outcome_unknown = 0 AND order_made_by <> 'razorpay'
         AND order_made_by LIKE ? AND order_made_by <> ? AND reservation_id > ? ORDER BY reservation_id LIMIT ${lost_orders_page_max}`,
        [`${mounted_simulator_stamp_prefix}%`, own, after],
      ),
    );
    for (const row of rows) {
      if (await context.ledger.transaction((tx, ledger_context) => markLost(tx, ledger_context, context, row))) marked++;
    }
    if (rows.length < lost_orders_page_max) return marked;
    after = rows.at(-1)!.reservation_id;
  }
}

async function markLost(tx: SqlTx, context: LedgerContext, gate: GateContext, row: HeldRow): Promise<boolean> {
  await lockBlock(tx, row.block_id);
  const reservation = await getReservation(tx, row.reservation_id);
  // Read again under the lock: what changed since the page was read is left alone.
  if (!reservation || reservation.status !== "held" || reservation.order_id === null || reservation.outcome_unknown || !orderLostWithSimulator(gate, reservation)) {
    return false;
  }
  await markUnknown(tx, context, reservation, lostOrderUnknownReason(reservation.reservation_id, reservation.order_id));
  return true;
}

/** The one line a start logs when it marked such holds (an evidence entry marks each; see markLostOrders). */
export function lostOrdersWarning(marked: number): string {
  return `${marked} held reservation(s) name orders an earlier process's mounted simulator made, which kept orders in memory only: nothing can be paid or captured on them any more. GET /api/v1/inbox lists them under unknown_outcomes; POST /api/v1/reservations/{id}/check releases each hold`;
}
