// A replay returns the call's current state: the stored order or payment with its reservation's
// block as it is now (not the agent's current block, which may be another), an unknown outcome
// as unknown, a hold released for want of an order as such, and a HOLD as pending, approved
// (with its result), denied or expired.

import type { AuthorizeResult } from "../ledger/index.js";
import { blockSummary, type GateContext } from "./context.js";
import {
  approvalDecided,
  captureAllowed,
  captureConflict,
  held,
  orderAllowed,
  orderNeverMade,
  outcomeUnknown,
  providerRefused,
  type ToolResult,
} from "./results.js";

type Stored = Record<string, unknown> & { reservation_id?: string; reason?: string };

export function renderStored(
  stored: Stored,
  block: Parameters<typeof orderAllowed>[2],
  evidence: AuthorizeResult["evidence"],
  replayed: boolean,
): ToolResult {
  const reservation_id = String(stored.reservation_id ?? "");
  if (stored.provider === "unknown") return outcomeUnknown(reservation_id, String(stored.reason ?? "unknown"), evidence, replayed);
  if (stored.provider === "no_order") return orderNeverMade(reservation_id, String(stored.reason ?? "the provider made no order"), evidence, replayed);
  if (stored.provider === "refused") {
    return providerRefused(reservation_id, stored.error as { code: string; description: string }, evidence, block);
  }
  if (stored.payment && stored.reconciliation === "rejected") {
    return captureConflict(stored.payment as Record<string, unknown>, String(stored.reason ?? "a conflict"), block, evidence, replayed);
  }
  if (stored.payment) return captureAllowed(stored.payment as Record<string, unknown>, block, evidence, replayed);
  return orderAllowed(stored.order as Record<string, unknown>, reservation_id, block, evidence, replayed);
}

/** The rule and reason a denied approval's re-check stored (refuseGrant), when it was the re-check that denied it. */
function recheckRefusal(result_json: string | null): { rule: string; reason: string } | undefined {
  if (!result_json) return undefined;
  const stored = JSON.parse(result_json) as { rule?: unknown; reason?: unknown };
  if (typeof stored.reason !== "string") return undefined;
  // Denied by a re-check stored before the rule was: the rule its reason names, else HOLD.
  const rule = typeof stored.rule === "string" ? stored.rule : (/^(R\d): /.exec(stored.reason)?.[1] ?? "HOLD");
  return { rule, reason: stored.reason };
}

export async function replayResult(context: GateContext, auth: AuthorizeResult): Promise<ToolResult> {
  const row = auth.stored;
  if (!row) throw new Error("replay without a stored record");
  const block = auth.block ? await blockSummary(context, auth.block.block_id) : undefined;
  if (!block) throw new Error("replay without a block");
  if (row.effect === "HOLD" && row.approval_id) {
    // The approval as the replay's decision read it (and recorded), not as a later read finds it.
    const approval = auth.approval ?? (await context.ledger.approval(row.approval_id));
    if (!approval) throw new Error(`approval ${row.approval_id} vanished`);
    if (approval.state === "pending") {
      return held({ reason: "still waiting for an operator's approval" }, approval, block, auth.evidence, true);
    }
    if (approval.state === "denied" || approval.state === "expired") {
      return approvalDecided(approval.approval_id, approval.state, auth.evidence, recheckRefusal(approval.result_json));
    }
    if (!approval.result_json) return held({ reason: "approved; the call is being forwarded" }, approval, block, auth.evidence, true);
    return renderStored(JSON.parse(approval.result_json) as Stored, block, auth.evidence, true);
  }
  return renderStored(JSON.parse(row.result_json ?? "{}") as Stored, block, auth.evidence, true);
}
