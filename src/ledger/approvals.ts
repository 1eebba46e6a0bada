// Human approval of a HOLD: single-use and atomic (one conditional update moves it from
// pending to forwarding before the provider is called), re-checking expiry, revocation,
// freeze, the call's own hold and its agent; deny and expiry release the hold.

import { HttpError } from "../errors.js";
import { record, type LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import { resultUnknown, type ApprovalRow, type ApprovalView, type BlockRow, type ReservationRow } from "./rows.js";
import { getApproval, getReservation, lockBlock } from "./statements.js";
import { releaseHold } from "./settle.js";
import { expireApproval } from "./sweep.js";

export interface ApprovalGrant {
  approval: ApprovalRow;
  reservation: ReservationRow;
  args: unknown;
}

/** Set instead of an approval when it was past its lifetime: it was expired (hold released,
 *  evidence written) in this transaction, which must commit before the caller answers 409. */
export interface ExpiredApproval {
  expired: string;
}

/** The error a caller raises for an ExpiredApproval, once the expiry has committed. */
export function approvalExpiredError(outcome: ExpiredApproval): HttpError {
  return new HttpError(409, "approval_expired", outcome.expired);
}

async function loadPending(tx: SqlTx, context: LedgerContext, approval_id: string): Promise<ApprovalRow | ExpiredApproval> {
  const found = await getApproval(tx, approval_id);
  if (!found) throw new HttpError(404, "not_found", `no approval ${approval_id}`);
  await lockBlock(tx, found.block_id);
  // Read again under the block lock: under READ COMMITTED the first read may predate another
  // instance's decision on this approval.
  const approval = (await getApproval(tx, approval_id)) as ApprovalRow;
  const expired = `approval ${approval_id} expired before it was decided`;
  if (approval.state === "pending" && approval.expires_at_ms <= context.clock().getTime()) {
    await expireApproval(tx, context, approval);
    return { expired };
  }
  // Expired by the sweep already (it runs every second): answered as when this call expires it.
  if (approval.state === "expired") throw approvalExpiredError({ expired });
  if (approval.state !== "pending") {
    throw new HttpError(409, "approval_decided", `approval ${approval_id} is already ${approval.state}`);
  }
  return approval;
}

/** Why an approval's re-check refused it: the rule a new call would be refused under, and the reason. */
interface RecheckProblem {
  rule: "R1" | "R2" | "R4" | "HOLD" | "CALLER";
  reason: string;
}

/** Denies the approval with its re-check's rule and reason stored, which a replay of its key and get_approval report. */
async function refuseGrant(tx: SqlTx, context: LedgerContext, approval: ApprovalRow, reservation: ReservationRow | undefined, { rule, reason }: RecheckProblem) {
  const now_ms = context.clock().getTime();
  await tx.run("UPDATE approvals SET state = 'denied', decided_at_ms = ?, result_json = ? WHERE approval_id = ?", [
    now_ms,
    JSON.stringify({ effect: "BLOCK", rule, reason }),
    approval.approval_id,
  ]);
  if (reservation) await releaseHold(tx, context, reservation, `approval re-check failed: ${reason}`);
  await record(tx, context, "gate.operator", {
    action: "approval.recheck_failed",
    approval_id: approval.approval_id,
    reservation_id: approval.reservation_id,
    block_id: approval.block_id,
    rule,
    reason,
  });
}

async function agentDisabled(tx: SqlTx, agent_id: string): Promise<boolean> {
  const row = await tx.get<{ disabled_at_ms: number | null }>("SELECT disabled_at_ms FROM agents WHERE agent_id = ?", [agent_id]);
  return row?.disabled_at_ms != null;
}

function overdrawn(block: BlockRow): string {
  const { spent, held, unreconciled, reserved } = block;
  return `R1: the block's spent ${spent}, held ${held} (this call's hold included) and unreconciled ${unreconciled} come to more than its reserved ${reserved}`;
}

/** Moves a pending approval to forwarding after re-checking R2, R4, its own hold, its agent and
 *  that the block is not over its cap (R1, which unreconciled money can break after the HOLD). */
export async function beginApproval(
  tx: SqlTx,
  context: LedgerContext,
  approval_id: string,
): Promise<ApprovalGrant | { refused: string } | ExpiredApproval> {
  const approval = await loadPending(tx, context, approval_id);
  if ("expired" in approval) return approval;
  const now_ms = context.clock().getTime();
  const block = await lockBlock(tx, approval.block_id);
  const reservation = await getReservation(tx, approval.reservation_id);
  let problem: RecheckProblem | undefined;
  if (!block || block.revoked_at_ms !== null) problem = { rule: "R4", reason: "R4: the spending block is revoked" };
  else if (block.frozen_at_ms !== null) problem = { rule: "R4", reason: "R4: the spending block is frozen" };
  else if (now_ms >= block.expires_at_ms) problem = { rule: "R2", reason: "R2: the spending block has expired" };
  else if (!reservation || reservation.status !== "held") problem = { rule: "HOLD", reason: "the call's hold is no longer there" };
  // Only an order made elsewhere with the call's reservation id as its receipt can name it yet.
  else if (reservation.order_id !== null) problem = { rule: "HOLD", reason: `order ${reservation.order_id}, which the gate never sent, names the call's reservation` };
  else if (await agentDisabled(tx, approval.agent_id)) problem = { rule: "CALLER", reason: "the agent is disabled" };
  // Money that moved in a conflict meanwhile (unreconciled, counted once the block was unfrozen)
  // can leave the block over its cap: the call's hold is counted, but nothing more may be sent.
  else if (block.spent + block.held + block.unreconciled > block.reserved) problem = { rule: "R1", reason: overdrawn(block) };
  if (problem) {
    await refuseGrant(tx, context, approval, reservation, problem);
    return { refused: problem.reason };
  }
  const moved = await tx.run(
    "UPDATE approvals SET state = 'forwarding', decided_at_ms = ? WHERE approval_id = ? AND state = 'pending'",
    [now_ms, approval_id],
  );
  if (moved.changes !== 1) throw new HttpError(409, "approval_decided", `approval ${approval_id} was decided concurrently`);
  await record(tx, context, "gate.operator", { action: "approval.approve", approval_id, reservation_id: approval.reservation_id, block_id: approval.block_id });
  return { approval: { ...approval, state: "forwarding" }, reservation: reservation as ReservationRow, args: JSON.parse(approval.args_json) };
}

export async function denyApproval(tx: SqlTx, context: LedgerContext, approval_id: string): Promise<ApprovalView | ExpiredApproval> {
  const approval = await loadPending(tx, context, approval_id);
  return "expired" in approval ? approval : denyPending(tx, context, approval);
}

/** Denies a pending approval the caller loaded under its block's lock, and releases its hold;
 *  answers it as the operator's list shows it. `by` says what denied it: the operator's deny, or
 *  the revoke of its block (its entry says so, else it reads as a person's deny). */
export async function denyPending(tx: SqlTx, context: LedgerContext, approval: ApprovalRow, by: "operator" | "block.revoke" = "operator"): Promise<ApprovalView> {
  const now_ms = context.clock().getTime();
  await tx.run("UPDATE approvals SET state = 'denied', decided_at_ms = ? WHERE approval_id = ? AND state = 'pending'", [
    now_ms,
    approval.approval_id,
  ]);
  // The reservation is the approval's by foreign key.
  const reservation = (await getReservation(tx, approval.reservation_id)) as ReservationRow;
  await releaseHold(tx, context, reservation, by === "operator" ? "approval denied" : "approval denied: the block was revoked");
  await record(tx, context, "gate.operator", { action: "approval.deny", approval_id: approval.approval_id, reservation_id: approval.reservation_id, block_id: approval.block_id, by });
  return { ...approval, state: "denied", decided_at_ms: now_ms, amount: reservation.amount, currency: reservation.currency };
}

/**
 * Records the forwarded call's result on the approval (state approved). A result that arrives
 * after the forwarding's lease ran out replaces the unknown outcome recorded then.
 */
export async function finishApproval(tx: SqlTx, approval_id: string, result: unknown): Promise<void> {
  const approval = await getApproval(tx, approval_id);
  const unknown = approval?.state === "approved" && resultUnknown(approval.result_json);
  if (approval?.state !== "forwarding" && !unknown) return;
  await tx.run("UPDATE approvals SET state = 'approved', result_json = ? WHERE approval_id = ? AND state = ?", [
    JSON.stringify(result),
    approval_id,
    approval?.state ?? "forwarding",
  ]);
}
