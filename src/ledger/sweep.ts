// Time-driven transitions: in-flight leases that ran out (the process stopped, or could not
// record the provider's answer) become outcome-unknown, and approvals past their lifetime
// expire and release their hold.

import { record, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import type { ApprovalRow, IdempotencyRow } from "./rows.js";
import { getReservation, storeResult } from "./statements.js";
import { markUnknown, releaseHold } from "./settle.js";

export const sweep_blocks_max = 500;
/** Says only what is known: a live process whose COMMIT of the provider's answer failed (a
 *  terminated backend) leaves the same expired lease as one that stopped. */
export const lease_expired_reason =
  "this call's lease ran out before its outcome was recorded: the process handling it stopped, or could not record the provider's answer; what the provider did is unknown until a webhook or a reservation check tells (a check finds an order by its receipt)";

async function expireLease(tx: SqlTx, context: LedgerContext, row: IdempotencyRow): Promise<void> {
  const reservation = row.reservation_id ? await getReservation(tx, row.reservation_id) : undefined;
  if (reservation) await markUnknown(tx, context, reservation, lease_expired_reason);
  await storeResult(tx, row.agent_id, row.key, {
    provider: "unknown",
    reservation_id: row.reservation_id,
    reason: lease_expired_reason,
  });
}

export async function expireApproval(tx: SqlTx, context: LedgerContext, approval: ApprovalRow): Promise<void> {
  const now_ms = context.clock().getTime();
  await tx.run("UPDATE approvals SET state = 'expired', decided_at_ms = ? WHERE approval_id = ? AND state = 'pending'", [
    now_ms,
    approval.approval_id,
  ]);
  const reservation = await getReservation(tx, approval.reservation_id);
  if (reservation) await releaseHold(tx, context, reservation, "approval expired");
  await record(tx, context, "gate.operator", {
    action: "approval.expire",
    approval_id: approval.approval_id,
    reservation_id: approval.reservation_id,
    block_id: approval.block_id,
  });
}

/** In-flight keys of one block whose lease ran out (before a decision on the block, and in the
 *  sweep); the caller holds that block's lock, so no row of another block is written. */
export async function expireLeasesOfBlock(tx: SqlTx, context: LedgerContext, block_id: string): Promise<number> {
  const rows = await tx.all<IdempotencyRow>(
    `SELECT k.* FROM idempotency_keys k JOIN reservations r ON r.reservation_id = k.reservation_id
     WHERE r.block_id = ? AND k.status = 'in_flight' AND k.lease_expires_at_ms <= ?`,
    [block_id, context.clock().getTime()],
  );
  for (const row of rows) await expireLease(tx, context, row);
  return rows.length;
}

export const forwarding_expired_reason =
  "an approved call's forwarding ran out its lease before its outcome was recorded: the process forwarding it stopped, or could not record the provider's answer; what the provider did is unknown until a webhook or a reservation check tells (a check finds an order by its receipt)";

/**
 * Approved calls whose forwarding outlived the lease (the process died between the approval and
 * the provider's answer): like an expired in-flight key, the hold becomes outcome-unknown and
 * the approval records that, so nothing stays stuck and the operator inbox shows it.
 */
export async function expireForwarding(tx: SqlTx, context: LedgerContext, block_id: string): Promise<number> {
  const rows = await tx.all<ApprovalRow>("SELECT * FROM approvals WHERE block_id = ? AND state = 'forwarding' AND decided_at_ms <= ?", [
    block_id,
    context.clock().getTime() - context.lease_ms,
  ]);
  for (const approval of rows) {
    const reservation = await getReservation(tx, approval.reservation_id);
    if (reservation) await markUnknown(tx, context, reservation, forwarding_expired_reason);
    const result = { provider: "unknown", reservation_id: approval.reservation_id, reason: forwarding_expired_reason };
    await tx.run("UPDATE approvals SET state = 'approved', result_json = ? WHERE approval_id = ? AND state = 'forwarding'", [
      JSON.stringify(result),
      approval.approval_id,
    ]);
    // As every other change of an approval's state, recorded under its id.
    await record(tx, context, "gate.operator", {
      action: "approval.forward_expired",
      approval_id: approval.approval_id,
      reservation_id: approval.reservation_id,
      block_id: approval.block_id,
      reason: forwarding_expired_reason,
    });
  }
  return rows.length;
}

/** Blocks (at most sweep_blocks_max) with an expired lease, approval or forwarding, for a sweep
 *  that takes each block's lock before touching its rows. */
export async function blocksDue(tx: SqlTx, now_ms: number, lease_ms: number): Promise<string[]> {
  const rows = await tx.all<{ block_id: string }>(
    `SELECT r.block_id AS block_id FROM idempotency_keys k JOIN reservations r ON r.reservation_id = k.reservation_id
       WHERE k.status = 'in_flight' AND k.lease_expires_at_ms <= ?
     UNION
     SELECT block_id FROM approvals WHERE state = 'pending' AND expires_at_ms <= ?
     UNION
     SELECT block_id FROM approvals WHERE state = 'forwarding' AND decided_at_ms <= ?
     ORDER BY block_id LIMIT ${sweep_blocks_max}`,
    [now_ms, now_ms, now_ms - lease_ms],
  );
  return rows.map((row) => row.block_id);
}

/** Pending approvals past their lifetime, for one block or (bounded) for all. */
export async function expireApprovals(tx: SqlTx, context: LedgerContext, block_id?: string): Promise<number> {
  const now_ms = context.clock().getTime();
  const rows = block_id
    ? await tx.all<ApprovalRow>("SELECT * FROM approvals WHERE block_id = ? AND state = 'pending' AND expires_at_ms <= ?", [
        block_id,
        now_ms,
      ])
    : await tx.all<ApprovalRow>("SELECT * FROM approvals WHERE state = 'pending' AND expires_at_ms <= ? LIMIT 500", [now_ms]);
  for (const row of rows) await expireApproval(tx, context, row);
  return rows.length;
}
