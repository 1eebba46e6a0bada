// Holds on orders the simulator mounted in `bursar serve` lost with an earlier process: it keeps
// orders and payments in memory only, so after a restart nothing can be paid or captured on them.

import assert from "node:assert/strict";
import type { LedgerContext } from "../ledger/context.js";
import type { SqlTx } from "../ledger/driver.js";
import type { ReservationRow } from "../ledger/rows.js";
import { markUnknown, releaseHold } from "../ledger/settle.js";
import { approvalByReservation, dropUnknownKeys, getReservation, keyInFlightOn, lockBlock } from "../ledger/statements.js";
import { expireLeasesOfBlock } from "../ledger/sweep.js";
import type { GateContext, MountedSimulator } from "./context.js";

/** Held reservations marked per page at a start (one transaction each, under its block's lock). */
export const lost_orders_page_max = 100;

/** Why a check releases such a hold: the release entry's and the check's reason. */
export function lostOrderReleaseReason(order_id: string): string {
  return `the simulator mounted in this process was restarted and no longer has order ${order_id} (it keeps orders in memory only): nothing can be paid or captured on it`;
}

/** Why a start marks such a hold outcome-unknown: what the inbox shows until a check releases it. */
export function lostOrderUnknownReason(reservation_id: string, order_id: string): string {
  return `order ${order_id} was made by the simulator mounted in an earlier process, which kept it in memory only: nothing can be paid or captured on it any more; POST /api/v1/reservations/${reservation_id}/check releases the hold`;
}

/**
 * Whether the provider's "no such order" for the reservation's order proves the order lost: only
 * with the mounted simulator, which takes orders only from this process's own client and forgets
 * nothing while it runs, and only for a reservation made before this process started. Any other
 * provider's "no such order" proves nothing about an order the gate made: its keys may now be
 * another account's, where the order exists and can be paid.
 */
export function orderLostWithSimulator(context: GateContext, reservation: ReservationRow): MountedSimulator | undefined {
  const mounted = context.mounted_simulator;
  return mounted !== undefined && reservation.created_at_ms < mounted.started_at_ms ? mounted : undefined;
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
export async function releaseLostOrder(tx: SqlTx, context: LedgerContext, reservation_id: string, order_id: string): Promise<LostOutcome> {
  const block_id = (await getReservation(tx, reservation_id))?.block_id;
  if (block_id === undefined) return { kind: "kept", reason: `no reservation ${reservation_id}` };
  // The block lock comes before any write to its reservations; a call whose lease ran out (its
  // process stopped) is marked unknown first, so it no longer counts as in flight.
  await lockBlock(tx, block_id);
  await expireLeasesOfBlock(tx, context, block_id);
  const reservation = (await getReservation(tx, reservation_id)) as ReservationRow;
  if (reservation.status !== "held") return { kind: "kept", reason: `the reservation is ${reservation.status}` };
  if (reservation.order_id !== order_id) return { kind: "kept", reason: `the reservation names order ${String(reservation.order_id)}` };
  const approval = await approvalByReservation(tx, reservation_id);
  if (approval?.state === "forwarding" || (await keyInFlightOn(tx, reservation_id, { any_tool: true }))) {
    return { kind: "kept", reason: `a call on it is still waiting for the provider; check again once it has answered or its lease has run out` };
  }
  const reason = lostOrderReleaseReason(order_id);
  await releaseHold(tx, context, reservation, reason);
  await tx.run("DELETE FROM idempotency_keys WHERE reservation_id = ? AND tool = 'create_order'", [reservation_id]);
  await dropUnknownKeys(tx, reservation_id, "capture_payment");
  return { kind: "released", reason };
}

interface HeldRow {
  reservation_id: string;
  block_id: string;
}

/** Held reservations naming an order made before the start (so by an earlier process's simulator). */
const held_before_start_sql = "FROM reservations WHERE status = 'held' AND order_id IS NOT NULL AND created_at_ms < ?";

/**
 * At a start with the mounted simulator: every held reservation naming an order made before the
 * start names an order the fresh simulator cannot know. Those not yet outcome-unknown are marked
 * so (with evidence), so that GET /api/v1/inbox lists them and the operator can check each
 * (which releases it). Only rows not changed since the start are marked: an order named after it
 * (an approval forwarded meanwhile) is this simulator's own. Answers how many such holds there
 * are and how many this start marked.
 */
export async function markLostOrders(context: GateContext): Promise<{ held: number; marked: number }> {
  const mounted = context.mounted_simulator;
  assert.ok(mounted, "markLostOrders: the provider is not the mounted simulator");
  const started_at_ms = mounted.started_at_ms;
  const driver = context.ledger.driver;
  const count = await driver.read((tx) => tx.get<{ total: number }>(`SELECT COUNT(*) AS total ${held_before_start_sql}`, [started_at_ms]));
  const held = Number(count?.total ?? 0);
  let marked = 0;
  // Each page's rows are marked or no longer match, so the walk ends; the bound asserts it.
  const pages_max = Math.ceil(held / lost_orders_page_max) + 1;
  for (let page = 0; ; page++) {
    assert.ok(page <= pages_max, "markLostOrders: the walk did not end");
    const rows = await driver.read((tx) =>
      tx.all<HeldRow>(
        `SELECT reservation_id, block_id ${held_before_start_sql} AND outcome_unknown = 0 AND updated_at_ms < ? ORDER BY created_at_ms, reservation_id LIMIT ${lost_orders_page_max}`,
        [started_at_ms, started_at_ms],
      ),
    );
    for (const row of rows) {
      if (await context.ledger.transaction((tx, ledger_context) => markLost(tx, ledger_context, row, started_at_ms))) marked++;
    }
    if (rows.length < lost_orders_page_max) break;
  }
  return { held, marked };
}

async function markLost(tx: SqlTx, context: LedgerContext, row: HeldRow, started_at_ms: number): Promise<boolean> {
  await lockBlock(tx, row.block_id);
  const reservation = await getReservation(tx, row.reservation_id);
  // Read again under the lock: what changed since the page was read is left alone.
  if (!reservation || reservation.status !== "held" || reservation.order_id === null || reservation.outcome_unknown || reservation.updated_at_ms >= started_at_ms) {
    return false;
  }
  await markUnknown(tx, context, reservation, lostOrderUnknownReason(reservation.reservation_id, reservation.order_id));
  return true;
}

/** The one line a start logs when such holds exist (an evidence entry marks each; see markLostOrders). */
export function lostOrdersWarning(held: number): string {
  return `${held} held reservation(s) name orders made before this start by the mounted simulator, which keeps orders in memory only: nothing can be paid or captured on them any more. GET /api/v1/inbox lists them under unknown_outcomes; POST /api/v1/reservations/{id}/check releases each hold`;
}
