// decide(call, state, now) -> Verdict: pure and deterministic; reads and writes nothing.

import { guard_table } from "./guards.js";
import type { Guard, PolicyCall, PolicyState, Verdict } from "./types.js";

export const allow_verdict: Verdict = Object.freeze({ effect: "ALLOW", rule: "ALLOW", reason: "every rule passed" });

function runGuards(call: PolicyCall, state: PolicyState, now_ms: number, guards: readonly Guard[]): Verdict {
  // Every time comparison is false for NaN: an expired block would pass R2 and an empty window R6.
  if (!Number.isFinite(now_ms)) throw new Error("the clock's reading is not a time");
  for (const guard of guards) {
    const verdict = guard.check(call, state, now_ms);
    if (verdict) return verdict;
  }
  return allow_verdict;
}

/**
 * Decides one money call against a ledger snapshot. `guards` defaults to the full frozen
 * table; the mutation harness passes a table with one guard removed. Without FAIL_CLOSED
 * in the table an exception escapes, which is exactly what that mutant must show.
 */
export function decide(call: PolicyCall, state: PolicyState, now: Date, guards: readonly Guard[] = guard_table): Verdict {
  const failClosed = guards.some((guard) => guard.id === "FAIL_CLOSED");
  if (!failClosed) return runGuards(call, state, now.getTime(), guards);
  try {
    return runGuards(call, state, now.getTime(), guards);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { effect: "BLOCK", rule: "FAIL_CLOSED", reason: `the decision failed closed: ${message}` };
  }
}

/** A guard table without one guard: for the mutation harness only, never for production. */
export function withoutGuard(id: Guard["id"], guards: readonly Guard[] = guard_table): readonly Guard[] {
  if (!guards.some((guard) => guard.id === id)) throw new Error(`no guard ${id} in the table`);
  return Object.freeze(guards.filter((guard) => guard.id !== id));
}
