// Whether a capture's payment can change its verdict, decided before the gate asks the provider
// for it. A capture that every block its caller could capture on refuses before R3 (a replayed,
// conflicting or in-flight idempotency key, the velocity limit, malformed arguments, the per-call
// cap, or no live block at all) is refused whatever the provider would say, so the gate decides it
// without asking: such refusals, however many, never reach the provider.

import { decide, guard_table, type PaymentState } from "../policy/index.js";
import { blockPolicyState, boundReservation, captureInFlightElsewhere, idempotencyState, policyCall, stillReplays } from "./authorize.js";
import type { LedgerContext } from "./context.js";
import type { SqlTx } from "./driver.js";
import { callKey, type SentKey } from "./keys.js";
import { agentBlock, getIdempotency } from "./statements.js";

/** The guards that run before R3 in the frozen table: only they can decide without the payment. */
const guards_before_payment: ReadonlySet<string> = new Set(guard_table.slice(0, guard_table.findIndex((guard) => guard.id === "R3")).map((guard) => guard.id));

/** The payment state a capture is decided with when the gate did not ask the provider. */
export const payment_not_asked: PaymentState = Object.freeze({
  fetched: false,
  asked: false,
  reason: "not asked: every block this agent could capture on refused the call before its payment mattered",
});

/**
 * False when a guard before R3 refuses (or replays) the capture on every block it could be
 * decided on. A capture is decided on its reservation's block, one of the caller's own unless
 * CALLER refuses it. Every block but the agent's active one (createBlock allows one) is revoked
 * or expired and refuses at R4 or R2 whatever the payment, so the active block, or when there is
 * none the agent's latest, is the one checked, with the guards of the context's table that come
 * before R3. A table without R4 or R2 (a mutant) always has the payment looked up. `undecided`
 * money calls of the agent, checked but not yet recorded, count toward its velocity limit as
 * they will once recorded. A capture naming the payment bound to the caller's held reservation
 * while another capture of it is in flight is refused (CAPTURE_IN_FLIGHT, when the table has it)
 * without asking either. `sent`: the key as sent (SentKey). Read-only: the decision's own
 * transaction reads everything again, and should the answer have changed meanwhile, R3 refuses
 * the payment it was not given with "retry".
 */
export async function capturePaymentMatters(
  tx: SqlTx,
  context: LedgerContext,
  agent_id: string,
  args: unknown,
  undecided = 0,
  sent: SentKey = {},
): Promise<boolean> {
  const guards = context.guards.filter((guard) => guards_before_payment.has(guard.id));
  if (!guards.some((guard) => guard.id === "R4") || !guards.some((guard) => guard.id === "R2")) return true;
  const now = context.clock();
  const now_ms = now.getTime();
  const key = callKey(agent_id, "capture_payment", args, sent);
  let stored = await getIdempotency(tx, agent_id, key.key);
  // A lease that ran out is settled by the decision's own transaction first: its answer is unknown here.
  if (stored?.status === "in_flight" && (stored.lease_expires_at_ms ?? 0) <= now_ms) return true;
  if (stored && !(await stillReplays(tx, context, stored, now_ms))) stored = undefined;
  const seen = await blockPolicyState(tx, agent_id, (await agentBlock(tx, agent_id, now_ms)) ?? null, now_ms);
  const state = {
    ...seen,
    calls_in_window: seen.calls_in_window + (seen.block ? undecided : 0),
    idempotency: idempotencyState(stored),
    capture: {
      payment: payment_not_asked,
      reservation: null,
      payment_bound_elsewhere: false,
      other_capture_in_flight: await captureInFlightElsewhere(tx, await boundReservation(tx, agent_id, args), agent_id, key, now_ms),
    },
  };
  const call = policyCall({ agent_id, tool: "capture_payment", args, ...sent }, agent_id, key.params_hash);
  const verdict = decide(call, state, now, guards);
  return verdict.effect === "ALLOW" && !verdict.replay;
}
