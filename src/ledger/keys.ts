// Idempotency keys: explicit ones bind every argument and never expire; derived ones bind
// every argument but receipt and notes, so a model rewording those on retry still replays.

import { canonicalJson, hasLoneSurrogate } from "../evidence/canonical.js";
import { scrubbedCanonicalJson } from "../evidence/scrub.js";
import { sha256Hex } from "../ids.js";
import { control_characters, currency_pattern, isPlainObject } from "../policy/index.js";

export interface CallKey {
  key: string;
  derived: boolean;
  /** Of the parameters as sent: what R7 compares. */
  params_hash: string;
  /** Of the parameters scrubbed, when scrubbing changed them: what the decision's entry shows,
   *  since a hash of a guessable secret (a CVV in notes) gives it away to whoever reads the log. */
  logged_params_hash?: string;
}

/** A call's parameters as canonical JSON, with their hashes (CallKey): as sent, and scrubbed when that differs. */
function hashedParams(params: unknown): { text: string; hashes: Pick<CallKey, "params_hash" | "logged_params_hash"> } {
  // One walk for the common call, which holds nothing to scrub.
  const scrubbed = scrubbedCanonicalJson(params);
  if (scrubbed.redactions === 0) return { text: scrubbed.text, hashes: { params_hash: sha256Hex(scrubbed.text) } };
  const text = canonicalJson(params);
  return { text, hashes: { params_hash: sha256Hex(text), logged_params_hash: sha256Hex(scrubbed.text) } };
}

/**
 * The idempotency_key as the agent sent it, when the gate's representable() changed it (a lone
 * surrogate became U+FFFD, 1e400 became "[not a finite number]"): absent otherwise. The call's
 * key is derived from what was sent, so keys that differ only there stay different keys, and R0
 * refuses the call (PolicyCall.idempotency_key_sent).
 */
export interface SentKey {
  idempotency_key_sent?: unknown;
}

/** What `received` (arguments as parsed) sent as its idempotency_key, when `args` (the same made
 *  representable) carries another value there; `{}` when they agree. */
export function sentKey(received: unknown, args: unknown): SentKey {
  if (!isPlainObject(received) || !isPlainObject(args)) return {};
  const sent = received.idempotency_key;
  return sent === args.idempotency_key ? {} : { idempotency_key_sent: sent };
}

/** Arguments a derived key leaves out: free text a model rewords when it retries. */
const reworded_arguments = new Set(["receipt", "notes"]);
const money_fields = new Set(["amount", "currency", "payment_id", "order_id"]);

/**
 * What a derived key binds: the money fields (an ASCII currency upper-cased, as R0 compares
 * it) and every other argument but receipt and notes. Were a stray argument (`transfers`,
 * `partial_payment`, an empty idempotency_key) or a look-alike currency ("ınr" upper-cases to
 * "INR") left out, the call would replay an earlier ALLOW before R0 could refuse it.
 */
function stableFields(tool: string, args: unknown): unknown {
  if (!isPlainObject(args)) return { tool, args };
  const currency = typeof args.currency === "string" && currency_pattern.test(args.currency) ? args.currency.toUpperCase() : args.currency;
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
 * A key R0 refuses is still looked up first (R7, IN_FLIGHT and a replay come before R0), so it
 * must not look up another key's row: one with control characters (PostgreSQL text cannot hold
 * NUL) or a lone surrogate (its `k:` form would be the U+FFFD one a well-formed key has, and two
 * such keys would share it) is looked up by the SHA-256 of its UTF-16 code units, as sent, in a
 * form no `k:` key has. Code units, not UTF-8: UTF-8 too would turn every lone surrogate into
 * the same U+FFFD bytes.
 */
function hashedKey(explicit: string): string | undefined {
  if (!control_characters.test(explicit) && !hasLoneSurrogate(explicit)) return undefined;
  return `k#${sha256Hex(Buffer.from(explicit, "utf16le"))}`;
}

/**
 * The key a call is stored under. An explicit key is the caller's string, as sent (`sent`: see
 * SentKey); a derived key hashes the agent and stableFields (amount, currency, order/payment id
 * and any argument other than receipt and notes).
 */
export function callKey(agent_id: string, tool: string, args: unknown, sent: SentKey = {}): CallKey {
  const given = sent.idempotency_key_sent !== undefined ? sent.idempotency_key_sent : isPlainObject(args) ? args.idempotency_key : undefined;
  const explicit = typeof given === "string" ? given : undefined;
  if (explicit !== undefined && explicit.length > 0) {
    const key = hashedKey(explicit) ?? `k:${explicit}`;
    return { key, derived: false, ...hashedParams({ tool, args }).hashes };
  }
  const stable = hashedParams(stableFields(tool, args));
  return { key: `d:${sha256Hex(`${agent_id}\n${stable.text}`)}`, derived: true, ...stable.hashes };
}
