// The observer's shadow verdict: what Bursar's gate would have decided for an observed call,
// using only the policy's stateless guards (ALLOWLIST, R0, R5, HOLD) against limits and a
// tool map set on the source. The policy's own guard table decides; nothing is re-implemented.

import { z } from "zod";
import { representable } from "../evidence/canonical.js";
import { amount_max_minor, currencyProblem, decide, guard_table, type Guard, type PolicyState, type Verdict } from "../policy/index.js";

export const shadow_tools_max = 100;
export const shadow_tool_name_chars_max = 256;
/** The guards that need no ledger: FAIL_CLOSED wraps them, as in the gate. */
export const shadow_guard_ids: readonly Guard["id"][] = ["FAIL_CLOSED", "ALLOWLIST", "R0", "R5", "HOLD"];
const shadow_guards: readonly Guard[] = Object.freeze(guard_table.filter((guard) => shadow_guard_ids.includes(guard.id)));

const limit_minor = z.number().int().min(0).max(amount_max_minor);

export const shadow_settings_schema = z.strictObject({
  /** Observed tool name → the gate's money tool it stands for. */
  tools: z
    .record(z.string().min(1).max(shadow_tool_name_chars_max), z.string().max(shadow_tool_name_chars_max))
    .refine((tools) => Object.keys(tools).length <= shadow_tools_max, `at most ${shadow_tools_max} tools`),
  /** An active ISO 4217 code, as a block's; one issue naming what is wrong with it. */
  currency: z
    .string()
    .superRefine((currency, context) => {
      const problem = currencyProblem(currency);
      if (problem !== undefined) context.addIssue({ code: "custom", message: problem });
    })
    .transform((currency) => currency.toUpperCase()),
  per_call_cap: limit_minor,
  approval_threshold: limit_minor,
});
export type ShadowSettings = z.infer<typeof shadow_settings_schema>;

export interface ShadowVerdict extends Verdict {
  /** The money tool the observed tool was mapped to. */
  as_tool: string;
  checks: readonly Guard["id"][];
}

/** A block holding only the source's limits: the stateless guards read nothing else. */
function shadowState(settings: ShadowSettings): PolicyState {
  return {
    block: {
      block_id: "shadow",
      agent_id: "shadow",
      currency: settings.currency,
      reserved: 0,
      spent: 0,
      held: 0,
      unreconciled: 0,
      expires_at_ms: 0,
      per_call_cap: settings.per_call_cap,
      approval_threshold: settings.approval_threshold,
      velocity: { max_calls: 0, window_seconds: 0 },
      revoked: false,
      frozen: false,
    },
    calls_in_window: 0,
    idempotency: { status: "none" },
  };
}

/** The shadow verdict for an observed tools/call, or null when the source maps no money tool to it. */
export function shadowVerdict(settings: ShadowSettings | null, tool: string, args: unknown, now: Date): ShadowVerdict | null {
  if (!settings) return null;
  const as_tool = Object.hasOwn(settings.tools, tool) ? settings.tools[tool] : undefined;
  if (as_tool === undefined) return null;
  // The gate makes arguments representable before its policy sees them (1e400, lone surrogates): so does its shadow.
  const verdict = decide({ tool: as_tool, args: representable(args), agent_id: "shadow", params_hash: "" }, shadowState(settings), now, shadow_guards);
  return { ...verdict, as_tool, checks: shadow_guard_ids };
}

