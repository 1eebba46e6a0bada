// Holds on orders the simulator mounted in `bursar serve` lost with an earlier process: it keeps
// orders and payments in memory only, so after a restart nothing can be paid or captured on them.

import assert from "node:assert/strict";
import type { LedgerContext } from "../ledger/context.js";
import type { SqlTx } from "../ledger/driver.js";
import { finishApproval } from "../ledger/approvals.js";
import type { ReservationRow } from "../ledger/rows.js";
import { markUnknown, releaseHold } from "../ledger/settle.js";
import { approvalByReservation, dropUnknownKeys, getReservation, keyInFlightOn, lockBlock } from "../ledger/statements.js";
import { expireLeasesOfBlock } from "../ledger/sweep.js";
import type { GateContext } from "./context.js";

/** Why a check releases such a hold: the release entry's and the check's reason. */
export function lostOrderReleaseReason(order_id: string): string {
  return `the simulator mounted in this process was restarted and no longer has order ${order_id} (it keeps orders in memory only): nothing can be paid or captured on it`;
}

/** Why a start marks such a hold outcome-unknown: what the inbox shows until a check releases it. */
export function lostOrderUnknownReason(reservation_id: string, order_id: string): string {
  return `order ${order_id} was made by the simulator mounted in an earlier process, which kept it in memory only: nothing can be paid or captured on it any more; POST /api/v1/reservations/${reservation_id}/check releases the hold`;
}

/** A process's start as its `system.start` entry records it: when, and the provider it used. */
interface StartRecord {
  at_ms: number;
  provider: string | undefined;
}

/** Every start the log records, oldest first (a scan of the log: a check of a lost order, or a start with such holds, runs it). */
async function recordedStarts(context: GateContext): Promise<StartRecord[]> {
  const rows = await context.ledger.driver.read((tx) =>
    tx.all<{ received_at: string; entry_text: string }>("SELECT received_at, entry_text FROM log_entries WHERE kind = 'system.start' ORDER BY seq"),
  );
  return rows.map((row) => {
    const provider = (JSON.parse(row.entry_text) as { body?: { provider?: unknown } }).body?.provider;
    return { at_ms: Date.parse(row.received_at), provider: typeof provider === "string" ? provider : undefined };
  });
}

/**
 * Whether the reservation's order was made by a mounted simulator of an earlier process: the
 * start that preceded the reservation recorded the mounted simulator as its provider. A start
 * that recorded none (an older version) or another provider (a real account, a standalone
 * simulator) proves nothing, since such an order may still exist and be paid. SQLite only: one
 * process at a time uses its file, so the latest start before a reservation is the process that
 * made it; several processes on PostgreSQL start and run interleaved.
 */
function madeByMountedSimulator(reservation: Pick<ReservationRow, "created_at_ms">, starts: readonly StartRecord[]): boolean {
  const made_by = starts.filter((start) => start.at_ms <= reservation.created_at_ms).at(-1);
  return made_by?.provider === "simulator";
}

/**
 * Whether the provider's "no such order" for the reservation's order proves the order lost: only
 * with the mounted simulator, which takes orders only from this process's own client and forgets
 * nothing while it runs, for a reservation made before this process started by a process that
 * used a mounted simulator too, on SQLite (madeByMountedSimulator). Any other "no such order"
 * proves nothing about an order the gate made: the provider's keys may now be another account's,
 * where the order exists and can be paid.
 */
export async function orderLostWithSimulator(context: GateContext, reservation: ReservationRow): Promise<boolean> {
  const mounted = context.mounted_simulator;
  if (mounted === undefined || reservation.created_at_ms >= mounted.started_at_ms || context.ledger.driver.dialect !== "sqlite") return false;
  return madeByMountedSimulator(reservation, await recordedStarts(context));
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
  // An approved call whose forwarding went unanswered now answers that no order stands.
  if (approval) await finishApproval(tx, approval.approval_id, { provider: "no_order", reservation_id, reason });
  return { kind: "released", reason };
}

interface HeldRow {
  reservation_id: string;
  block_id: string;
  created_at_ms: number;
  updated_at_ms: number;
  outcome_unknown: number;
}

/** Held reservations naming an order made before the start. */
const held_before_start_sql = "FROM reservations WHERE status = 'held' AND order_id IS NOT NULL AND created_at_ms < ?";

/**
 * At a start with the mounted simulator: every held reservation whose order a mounted simulator
 * of an earlier process made (madeByMountedSimulator) names an order the fresh simulator cannot
 * know. Those not yet outcome-unknown are marked so (with evidence), so that GET /api/v1/inbox
 * lists them and the operator can check each (which releases it). Only rows not changed since
 * the start are marked: an order named after it (an approval forwarded meanwhile) is this
 * simulator's own. Answers how many such holds there are and how many this start marked.
 */
export async function markLostOrders(context: GateContext): Promise<{ held: number; marked: number }> {
  const mounted = context.mounted_simulator;
  assert.ok(mounted, "markLostOrders: the provider is not the mounted simulator");
  const driver = context.ledger.driver;
  if (driver.dialect !== "sqlite") return { held: 0, marked: 0 };
  const started_at_ms = mounted.started_at_ms;
  const candidates = await driver.read((tx) =>
    tx.all<HeldRow>(`SELECT reservation_id, block_id, created_at_ms, updated_at_ms, outcome_unknown ${held_before_start_sql} ORDER BY created_at_ms, reservation_id`, [started_at_ms]),
  );
  if (candidates.length === 0) return { held: 0, marked: 0 };
  const starts = await recordedStarts(context);
  const lost = candidates.filter((row) => madeByMountedSimulator(row, starts));
  let marked = 0;
  for (const row of lost) {
    if (row.outcome_unknown || row.updated_at_ms >= started_at_ms) continue;
    if (await context.ledger.transaction((tx, ledger_context) => markLost(tx, ledger_context, row, started_at_ms))) marked++;
  }
  return { held: lost.length, marked };
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
