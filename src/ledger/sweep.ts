// Time-driven transitions: in-flight leases that ran out (the process died) become
// outcome-unknown, and approvals past their lifetime expire and release their hold.

import { record, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import type { ApprovalRow, IdempotencyRow } from "./rows.js";
import { getReservation, storeResult } from "./statements.js";
import { markUnknown, releaseHold } from "./settle.js";

export const lease_expired_reason = "the process handling this call stopped before the provider answered";

async function expireLease(tx: SqlTx, context: LedgerContext, row: IdempotencyRow): Promise<void> {
  const reservation = row.reservation_id ? await getReservation(tx, row.reservation_id) : undefined;
  if (reservation) await markUnknown(tx, context, reservation, lease_expired_reason);
  await storeResult(tx, row.agent_id, row.key, {
    provider: "unknown",
    reservation_id: row.reservation_id,
    reason: lease_expired_reason,
  });
}

/** Expired leases of one agent (before a decision) or of everyone (at start and on a timer). */
export async function expireLeases(tx: SqlTx, context: LedgerContext, agent_id?: string): Promise<number> {
  const now_ms = context.clock().getTime();
  const rows = agent_id
    ? await tx.all<IdempotencyRow>(
        "SELECT * FROM idempotency_keys WHERE agent_id = ? AND status = 'in_flight' AND lease_expires_at_ms <= ?",
        [agent_id, now_ms],
      )
    : await tx.all<IdempotencyRow>(
        "SELECT * FROM idempotency_keys WHERE status = 'in_flight' AND lease_expires_at_ms <= ? LIMIT 500",
        [now_ms],
      );
  for (const row of rows) await expireLease(tx, context, row);
  return rows.length;
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
