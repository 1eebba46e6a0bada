// Whether a capture's payment can change its verdict, decided before the gate asks the provider
// for it. A capture that every block its caller could capture on refuses before R3 (a replayed,
// conflicting or in-flight idempotency key, the velocity limit, malformed arguments, the per-call
// cap, or no live block at all) is refused whatever the provider would say, so the gate decides it
// without asking: such refusals, however many, never reach the provider.

import { decide, guard_table, type PaymentState } from "../policy/index.js";
import { idempotencyState, stillReplays } from "./authorize.js";
import type { LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import { callKey } from "./keys.js";
import { blockState, type BlockRow } from "./rows.js";
import { countCalls, getIdempotency } from "./statements.js";

/** The guards that run before R3 in the frozen table: only they can decide without the payment. */
const guards_before_payment: ReadonlySet<string> = new Set(guard_table.slice(0, guard_table.findIndex((guard) => guard.id === "R3")).map((guard) => guard.id));

/** Blocks checked at most; an agent with more (with live blocks only: createBlock allows one
 *  active block per agent) always has the payment looked up: the check is only a shortcut. */
export const blocks_checked_max = 8;

/** The payment state a capture is decided with when the gate did not ask the provider. */
export const payment_not_asked: PaymentState = Object.freeze({
  fetched: false,
  asked: false,
  reason: "not asked: every block this agent could capture on refused the call before its payment mattered",
});

/**
 * False when a guard before R3 refuses (or replays) the capture on every block it could be
 * decided on. A capture is decided on its reservation's block, one of the caller's own unless
 * CALLER refuses it. The guards are the context's table's up to R3 (a mutant table without some
 * guard checks without it too); with R4 and R2 among them a revoked, frozen or expired block
 * refuses whatever the payment, so only live blocks are read. `undecided` money calls of the
 * agent, checked but not yet recorded, count toward its velocity limit as they will once
 * recorded. Read-only: the decision's own
 * transaction reads everything again, and should the answer have changed meanwhile, R3 refuses
 * the payment it was not given with "retry".
 */
export async function capturePaymentMatters(tx: SqlTx, context: LedgerContext, agent_id: string, args: unknown, undecided = 0): Promise<boolean> {
  const now = context.clock();
  const now_ms = now.getTime();
  const guards = context.guards.filter((guard) => guards_before_payment.has(guard.id));
  // Only a table with R4 and R2 refuses on a dead block whatever the payment; without either, every block is checked.
  const live_only = guards.some((guard) => guard.id === "R4") && guards.some((guard) => guard.id === "R2");
  const blocks = await tx.all<BlockRow>(
    `SELECT * FROM blocks WHERE agent_id = ?${live_only ? " AND revoked_at_ms IS NULL AND frozen_at_ms IS NULL AND expires_at_ms > ?" : ""}
     ORDER BY created_at_ms DESC LIMIT ${blocks_checked_max + 1}`,
    live_only ? [agent_id, now_ms] : [agent_id],
  );
  if (blocks.length > blocks_checked_max) return true;
  const key = callKey(agent_id, "capture_payment", args);
  let stored = await getIdempotency(tx, agent_id, key.key);
  // A lease that ran out is settled by the decision's own transaction first: its answer is unknown here.
  if (stored?.status === "in_flight" && (stored.lease_expires_at_ms ?? 0) <= now_ms) return true;
  if (stored && !(await stillReplays(tx, context, stored, now_ms))) stored = undefined;
  const call = { tool: "capture_payment", args, agent_id, params_hash: key.params_hash };
  const capture = { payment: payment_not_asked, reservation: null };
  const idempotency = idempotencyState(stored);
  for (const block of blocks.length > 0 ? blocks : [null]) {
    const calls_in_window = block
      ? undecided + (await countCalls(tx, agent_id, now_ms, { window_seconds: block.velocity_window_seconds, max_calls: block.velocity_max_calls }))
      : 0;
    const state = { block: block ? blockState(block) : null, calls_in_window, idempotency, capture };
    const verdict = decide(call, state, now, guards);
    if (verdict.effect === "ALLOW" && !verdict.replay) return true;
  }
  return false;
}
