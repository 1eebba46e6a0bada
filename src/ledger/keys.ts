// Idempotency keys: explicit ones bind every argument and never expire; derived ones bind
// only the stable money fields, so a model rewording receipt or notes on retry still replays.

import { canonicalJson } from "../evidence/canonical.js";
import { sha256Hex } from "../ids.js";
import { control_characters, isPlainObject } from "../policy/index.js";

export interface CallKey {
  key: string;
  derived: boolean;
  params_hash: string;
}

function stableFields(tool: string, args: unknown): unknown {
  if (!isPlainObject(args)) return { tool, args };
  const currency = typeof args.currency === "string" ? args.currency.toUpperCase() : args.currency;
  return {
    tool,
    amount: args.amount ?? null,
    currency: currency ?? null,
    payment_id: args.payment_id ?? null,
    order_id: args.order_id ?? null,
  };
}

/**
 * The key a call is stored under. An explicit key is the caller's string; a derived key
 * hashes (agent, tool, amount, upper-cased currency, order/payment id).
 */
export function callKey(agent_id: string, tool: string, args: unknown): CallKey {
  const explicit = isPlainObject(args) && typeof args.idempotency_key === "string" ? args.idempotency_key : undefined;
  if (explicit !== undefined && explicit.length > 0) {
    // R0 refuses a key with control characters, but it is looked up first, and PostgreSQL text
    // cannot hold NUL: such a key is stored and looked up by its hash, in a form no `k:` key has.
    const key = control_characters.test(explicit) ? `k#${sha256Hex(explicit)}` : `k:${explicit}`;
    return { key, derived: false, params_hash: sha256Hex(canonicalJson({ tool, args })) };
  }
  const stable = canonicalJson(stableFields(tool, args));
  return { key: `d:${sha256Hex(`${agent_id}\n${stable}`)}`, derived: true, params_hash: sha256Hex(stable) };
}
