// Small typed SQL steps shared by the ledger operations; each runs inside the caller's transaction.

import type { SqlTx } from "./driver.js";
import { resultUnknown, type ApprovalRow, type BlockRow, type IdempotencyRow, type ReservationRow } from "./rows.js";

/** Locks the block row for the rest of the transaction (row lock on PostgreSQL). */
export function lockBlock(tx: SqlTx, block_id: string): Promise<BlockRow | undefined> {
  return tx.get<BlockRow>(`SELECT * FROM blocks WHERE block_id = ? ${tx.forUpdate}`, [block_id]);
}

/** A block's row as this transaction reads it, not locked. */
export function readBlock(tx: SqlTx, block_id: string): Promise<BlockRow | undefined> {
  return tx.get<BlockRow>("SELECT * FROM blocks WHERE block_id = ?", [block_id]);
}

/**
 * The agent's row, locked until commit on PostgreSQL (NO KEY UPDATE: it does not block the
 * foreign-key checks of the agent's own money calls), so that of two changes to one agent on two
 * instances the second waits and sees the first's. On SQLite the writer lock serializes them.
 */
export function lockAgent<Row>(tx: SqlTx, agent_id: string, columns: string): Promise<Row | undefined> {
  return tx.get<Row>(`SELECT ${columns} FROM agents WHERE agent_id = ? ${tx.forNoKeyUpdate}`, [agent_id]);
}

/** Which of an agent's blocks is "its" block: the active one if any, else the most recent. One `?`: now. */
export const agent_block_order = "CASE WHEN revoked_at_ms IS NULL AND expires_at_ms > ? THEN 0 ELSE 1 END, created_at_ms DESC, block_id DESC";

/** The agent's active block if it has one, else its most recent block: `columns` of it, `lock` after. */
function agentBlockSql(columns: string, lock: string): string {
  return `SELECT ${columns} FROM blocks WHERE agent_id = ? ORDER BY ${agent_block_order} LIMIT 1 ${lock}`;
}

/** The id of the agent's active block if it has one, else of its most recent block. */
export async function agentBlockId(tx: SqlTx, agent_id: string, now_ms: number): Promise<string | undefined> {
  const row = await tx.get<{ block_id: string }>(agentBlockSql("block_id", ""), [agent_id, now_ms]);
  return row?.block_id;
}

/** The agent's active block if it has one, else its most recent block, unlocked (for a read). */
export function agentBlock(tx: SqlTx, agent_id: string, now_ms: number): Promise<BlockRow | undefined> {
  return tx.get<BlockRow>(agentBlockSql("*", ""), [agent_id, now_ms]);
}

/**
 * agentBlockId then lockBlock, in one statement. On PostgreSQL the row is chosen before its lock
 * is taken, as with the two statements, and the row returned is its version after the lock
 * (agent_id, the only filter, never changes).
 */
export function lockAgentBlock(tx: SqlTx, agent_id: string, now_ms: number): Promise<BlockRow | undefined> {
  return tx.get<BlockRow>(agentBlockSql("*", tx.forUpdate), [agent_id, now_ms]);
}

export interface BlockDelta {
  spent?: number;
  held?: number;
  unreconciled?: number;
}

export async function adjustBlock(tx: SqlTx, block_id: string, delta: BlockDelta): Promise<void> {
  const result = await tx.run(
    "UPDATE blocks SET spent = spent + ?, held = held + ?, unreconciled = unreconciled + ? WHERE block_id = ?",
    [delta.spent ?? 0, delta.held ?? 0, delta.unreconciled ?? 0, block_id],
  );
  if (result.changes !== 1) throw new Error(`block ${block_id} vanished while adjusting it`);
}

/**
 * Marks a held reservation outcome-unknown (the operator's inbox lists it) with `reason`, its
 * clock for a check's waits starting now; false when it is no longer held (a known outcome).
 */
export async function flagOutcomeUnknown(tx: SqlTx, reservation_id: string, reason: string, now_ms: number): Promise<boolean> {
  const flagged = await tx.run(
    "UPDATE reservations SET outcome_unknown = 1, unknown_reason = ?, updated_at_ms = ? WHERE reservation_id = ? AND status = 'held'",
    [reason, now_ms, reservation_id],
  );
  return flagged.changes === 1;
}

export async function freezeBlock(tx: SqlTx, block_id: string, reason: string, now_ms: number): Promise<void> {
  await tx.run(
    "UPDATE blocks SET frozen_at_ms = COALESCE(frozen_at_ms, ?), freeze_reason = COALESCE(freeze_reason, ?) WHERE block_id = ?",
    [now_ms, reason, block_id],
  );
}

export function getReservation(tx: SqlTx, reservation_id: string): Promise<ReservationRow | undefined> {
  return tx.get<ReservationRow>("SELECT * FROM reservations WHERE reservation_id = ?", [reservation_id]);
}

/**
 * A reservation read under its block's lock, taken first (the block lock comes before any write to
 * its reservations, and under READ COMMITTED a read taken before the lock may predate another
 * writer); undefined for no such reservation.
 */
export async function lockedReservation(tx: SqlTx, reservation_id: string): Promise<ReservationRow | undefined> {
  const found = await getReservation(tx, reservation_id);
  if (!found) return undefined;
  await lockBlock(tx, found.block_id);
  return getReservation(tx, reservation_id);
}

export function reservationByOrder(tx: SqlTx, order_id: string): Promise<ReservationRow | undefined> {
  return tx.get<ReservationRow>("SELECT * FROM reservations WHERE order_id = ?", [order_id]);
}

/**
 * Whether a key is in flight on the reservation: a capture_payment key (any tool's with
 * `any_tool`), other than `except`, and with `lease_after_ms` only one whose lease has not run out
 * by then (one that ran out is outcome-unknown, whatever the sweep has recorded so far).
 */
export async function keyInFlightOn(
  tx: SqlTx,
  reservation_id: string,
  options: { except?: { agent_id: string; key: string }; lease_after_ms?: number; any_tool?: boolean } = {},
): Promise<boolean> {
  const { except, lease_after_ms, any_tool = false } = options;
  const row = await tx.get<{ one: number }>(
    `SELECT 1 AS one FROM idempotency_keys WHERE status = 'in_flight' AND reservation_id = ?${any_tool ? "" : " AND tool = 'capture_payment'"}${
      lease_after_ms === undefined ? "" : " AND lease_expires_at_ms > ?"
    }${except ? " AND NOT (agent_id = ? AND key = ?)" : ""} LIMIT 1`,
    [reservation_id, ...(lease_after_ms === undefined ? [] : [lease_after_ms]), ...(except ? [except.agent_id, except.key] : [])],
  );
  return row !== undefined;
}

export function reservationByPayment(tx: SqlTx, payment_id: string): Promise<ReservationRow | undefined> {
  return tx.get<ReservationRow>("SELECT * FROM reservations WHERE payment_id = ?", [payment_id]);
}

export async function insertReservation(tx: SqlTx, row: ReservationRow): Promise<void> {
  await tx.run(
    `INSERT INTO reservations (reservation_id, block_id, agent_id, amount, currency, status, outcome_unknown,
       unknown_reason, order_id, payment_id, captured_amount, release_reason, created_at_ms, updated_at_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.reservation_id, row.block_id, row.agent_id, row.amount, row.currency, row.status, row.outcome_unknown,
      row.unknown_reason, row.order_id, row.payment_id, row.captured_amount, row.release_reason,
      row.created_at_ms, row.updated_at_ms,
    ],
  );
}

export function getIdempotency(tx: SqlTx, agent_id: string, key: string): Promise<IdempotencyRow | undefined> {
  return tx.get<IdempotencyRow>("SELECT * FROM idempotency_keys WHERE agent_id = ? AND key = ?", [agent_id, key]);
}

/** Writes a key's row; `replace` when a row that no longer replays (an expired derived key) is there. */
export async function putIdempotency(tx: SqlTx, row: IdempotencyRow, replace: boolean): Promise<void> {
  if (replace) await tx.run("DELETE FROM idempotency_keys WHERE agent_id = ? AND key = ?", [row.agent_id, row.key]);
  await tx.run(
    `INSERT INTO idempotency_keys (agent_id, key, derived, tool, params_hash, status, effect, reservation_id,
       approval_id, result_json, first_at_ms, lease_expires_at_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.agent_id, row.key, row.derived, row.tool, row.params_hash, row.status, row.effect, row.reservation_id,
      row.approval_id, row.result_json, row.first_at_ms, row.lease_expires_at_ms,
    ],
  );
}

type KeyTool = "create_order" | "capture_payment";

/** The keys of a reservation's `tool` calls. */
function keysOf(tx: SqlTx, reservation_id: string, tool: KeyTool) {
  return tx.all<{ agent_id: string; key: string; status: string; result_json: string | null }>(
    "SELECT agent_id, key, status, result_json FROM idempotency_keys WHERE reservation_id = ? AND tool = ?",
    [reservation_id, tool],
  );
}

/**
 * Gives `result` to the keys of a reservation's `tool` calls that do not know it yet: one still in
 * flight, and one that stored an unknown outcome. Whichever path learns the outcome first (the
 * call itself, a webhook, an operator check), the keys then replay it.
 */
export async function completeKeys(tx: SqlTx, reservation_id: string, tool: KeyTool, result: unknown): Promise<void> {
  for (const row of await keysOf(tx, reservation_id, tool)) {
    if (row.status === "in_flight" || resultUnknown(row.result_json)) await storeResult(tx, row.agent_id, row.key, result);
  }
}

/** Drops the keys of a reservation's `tool` calls that stored an unknown outcome (proven to have
 *  moved nothing), so they are decided afresh when repeated; returns how many. */
export async function dropUnknownKeys(tx: SqlTx, reservation_id: string, tool: KeyTool): Promise<number> {
  const unknown = (await keysOf(tx, reservation_id, tool)).filter((row) => row.status === "stored" && resultUnknown(row.result_json));
  for (const row of unknown) await dropIdempotency(tx, row.agent_id, row.key);
  return unknown.length;
}

/**
 * Stores the key's result; with `reservation_id`, only while the row is still that reservation's:
 * a call's own answer that comes late (after a check released its hold and the key was used
 * for a new call) must not overwrite the new call's row.
 */
export async function storeResult(tx: SqlTx, agent_id: string, key: string, result: unknown, reservation_id?: string): Promise<void> {
  const update = "UPDATE idempotency_keys SET status = 'stored', effect = COALESCE(effect, 'ALLOW'), result_json = ?, lease_expires_at_ms = NULL WHERE agent_id = ? AND key = ?";
  if (reservation_id === undefined) await tx.run(update, [JSON.stringify(result), agent_id, key]);
  else await tx.run(`${update} AND reservation_id = ?`, [JSON.stringify(result), agent_id, key, reservation_id]);
}

/** Deletes the key's row; with `reservation_id`, only while the row is still that reservation's. */
export async function dropIdempotency(tx: SqlTx, agent_id: string, key: string, reservation_id?: string): Promise<void> {
  if (reservation_id === undefined) {
    await tx.run("DELETE FROM idempotency_keys WHERE agent_id = ? AND key = ?", [agent_id, key]);
    return;
  }
  await tx.run("DELETE FROM idempotency_keys WHERE agent_id = ? AND key = ? AND reservation_id = ?", [agent_id, key, reservation_id]);
}

export function getApproval(tx: SqlTx, approval_id: string): Promise<ApprovalRow | undefined> {
  return tx.get<ApprovalRow>("SELECT * FROM approvals WHERE approval_id = ?", [approval_id]);
}

export function approvalByReservation(tx: SqlTx, reservation_id: string): Promise<ApprovalRow | undefined> {
  return tx.get<ApprovalRow>("SELECT * FROM approvals WHERE reservation_id = ?", [reservation_id]);
}

/**
 * The agent's money calls since now − window_seconds, counted up to max_calls (the velocity guard
 * asks only whether max_calls is reached). An agent's calls are numbered in time order
 * (recordMoneyCall), so the count is the newest call's number less the window's first call's,
 * plus one: two index seeks, however many calls the window holds. Stepping through them instead
 * made each decision, under the one write lock, read up to max_calls index entries. Calls stamped
 * after `now` count too: after the host's clock steps back they are the window's most recent
 * calls, and leaving them out would let as many calls through again.
 */
export async function countCalls(tx: SqlTx, agent_id: string, now_ms: number, velocity: { window_seconds: number; max_calls: number }): Promise<number> {
  const row = await tx.get<{ last_n: number | null; first_n: number | null }>(count_calls_sql, [agent_id, agent_id, now_ms - velocity.window_seconds * 1000]);
  return callsInWindow(row?.last_n ?? null, row?.first_n ?? null, velocity.max_calls);
}

/** countCalls' statement: the numbers of the agent's newest call and of the first in the window. */
export const count_calls_sql = `SELECT (SELECT n FROM money_calls WHERE agent_id = ? ORDER BY at_ms DESC, n DESC LIMIT 1) AS last_n,
  (SELECT n FROM money_calls WHERE agent_id = ? AND at_ms > ? ORDER BY at_ms, n LIMIT 1) AS first_n`;

/** The calls in a window from the numbers of the agent's newest call and of the window's first
 *  (null when there is none), up to max_calls. */
export function callsInWindow(newest_n: number | null, first_n: number | null, max_calls: number): number {
  if (newest_n === null || first_n === null) return 0;
  return Math.min(newest_n - first_n + 1, max_calls);
}

/**
 * Records one money call of the agent for the velocity guard: numbered one past the agent's newest
 * call, and stamped no earlier than it, so that time order and number order agree (countCalls
 * relies on it). A call made after the host's clock stepped back is stamped with the newest call's
 * time: it stays in the window as long as that call, which errs on the side of counting it.
 *
 * On PostgreSQL two transactions of one agent may lock different blocks (or none, for an agent
 * without one), so the agent's numbering is serialized by a transaction-level advisory lock on
 * the agent, taken in a statement of its own: the read of the newest call that follows sees a
 * call the lock waited for. A batch reads the newest calls before any such lock (authorizeBatch);
 * a number it takes meanwhile collides on the key (agent_id, n), and the driver runs the batch again.
 */
export async function recordMoneyCall(tx: SqlTx, agent_id: string, now_ms: number): Promise<void> {
  // Advisory locks are the whole database's: the schema is in the key, so deployments (or test
  // runs) in other schemas of one database never wait on each other's agents of the same id.
  if (tx.dialect === "postgres") await tx.get("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':bursar.money_calls:' || ?, 0)) AS locked", [agent_id]);
  await tx.run(
    `INSERT INTO money_calls (agent_id, at_ms, n)
       SELECT CAST(? AS TEXT), CASE WHEN newest.at_ms > CAST(? AS BIGINT) THEN newest.at_ms ELSE CAST(? AS BIGINT) END, COALESCE(newest.n, 0) + 1
       FROM (SELECT 1 AS one) AS here
       LEFT JOIN (SELECT at_ms, n FROM money_calls WHERE agent_id = ? ORDER BY at_ms DESC, n DESC LIMIT 1) AS newest ON TRUE`,
    [agent_id, now_ms, now_ms, agent_id],
  );
}
