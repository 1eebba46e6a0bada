// Idempotency keys: explicit ones bind every argument and never expire; derived ones bind
// every argument but receipt and notes, so a model rewording those on retry still replays.

import { canonicalJson } from "../evidence/canonical.js";
import { sha256Hex } from "../ids.js";
import { control_characters, isPlainObject } from "../policy/index.js";

export interface CallKey {
  key: string;
  derived: boolean;
  params_hash: string;
}

/** Arguments a derived key leaves out: free text a model rewords when it retries. */
const reworded_arguments = new Set(["receipt", "notes"]);
const money_fields = new Set(["amount", "currency", "payment_id", "order_id"]);
const ascii_currency = /^[A-Za-z]{3}$/;

/**
 * What a derived key binds: the money fields (an ASCII currency upper-cased, as R0 compares
 * it) and every other argument but receipt and notes. Were a stray argument (`transfers`,
 * `partial_payment`, an empty idempotency_key) or a look-alike currency ("ınr" upper-cases to
 * "INR") left out, the call would replay an earlier ALLOW before R0 could refuse it.
 */
function stableFields(tool: string, args: unknown): unknown {
  if (!isPlainObject(args)) return { tool, args };
  const currency = typeof args.currency === "string" && ascii_currency.test(args.currency) ? args.currency.toUpperCase() : args.currency;
  const fields: Record<string, unknown> = {
    tool,
    amount: args.amount ?? null,
    currency: currency ?? null,
    payment_id: args.payment_id ?? null,
    order_id: args.order_id ?? null,
  };
  const other = Object.entries(args).filter(([name]) => !reworded_arguments.has(name) && !money_fields.has(name));
  // Only present when there is something: a clean call's key is what it always was.
  if (other.length > 0) fields.other = Object.fromEntries(other);
  return fields;
}

/**
 * The key a call is stored under. An explicit key is the caller's string; a derived key
 * hashes the agent and stableFields (amount, currency, order/payment id and any argument
 * other than receipt and notes).
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
