// R0's argument checks: every reason names the field and the limit it broke.

import { characterCount, hasLoneSurrogate, shortened, shown_units_max } from "./text.js";
import {
  amount_max_minor,
  amount_min_minor,
  currencyProblem,
  declared_arguments,
  idempotency_key_length_max,
  isCurrencyCode,
  note_key_length_max,
  note_value_length_max,
  notes_keys_max,
  payment_id_pattern,
  receipt_length_max,
  required_arguments,
} from "./limits.js";

type Args = Readonly<Record<string, unknown>>;

export function isPlainObject(value: unknown): value is Args {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" && !Number.isInteger(value)) return `the non-integer ${value}`;
  if (typeof value === "number") return `${value}`;
  return `a ${typeof value}`;
}

export function checkAmount(value: unknown): string | undefined {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    return `amount must be a safe integer of minor units, got ${describe(value)}`;
  }
  if (value < amount_min_minor) return `amount ${value} is below the minimum ${amount_min_minor}`;
  if (value > amount_max_minor) return `amount ${value} is above the maximum ${amount_max_minor}`;
  return undefined;
}

/** Three ASCII letters naming an active ISO 4217 code (currencies.ts), equal to the block's in either case. */
export function checkCurrency(value: unknown, block_currency: string): string | undefined {
  if (!isCurrencyCode(value)) return `currency ${currencyProblem(value)}`;
  if (value.toUpperCase() !== block_currency) {
    return `currency ${value.toUpperCase()} does not match the block's ${block_currency}`;
  }
  return undefined;
}

function checkReceipt(value: unknown): string | undefined {
  if (typeof value !== "string") return `receipt must be a string, got ${describe(value)}`;
  if (value.length > receipt_length_max) return `receipt is longer than ${receipt_length_max} characters`;
  return undefined;
}

function checkNotes(value: unknown): string | undefined {
  if (!isPlainObject(value)) return `notes must be an object of strings, got ${describe(value)}`;
  const entries = Object.entries(value);
  if (entries.length > notes_keys_max) return `notes has ${entries.length} keys; at most ${notes_keys_max}`;
  for (const [key, note] of entries) {
    if (key.length > note_key_length_max) return `notes key is longer than ${note_key_length_max} characters`;
    if (typeof note !== "string" && !(typeof note === "number" && Number.isFinite(note))) {
      return `notes.${key} must be a string or number`;
    }
    if (String(note).length > note_value_length_max) {
      return `notes.${key} is longer than ${note_value_length_max} characters`;
    }
  }
  return undefined;
}

/**
 * C0 controls and DEL: no idempotency key has them, and PostgreSQL text cannot hold NUL. Kept to
 * this set on purpose: a key is compared as sent, never shown as an identity, so an invisible
 * character in it misleads no one; and src/ledger/keys.ts looks up a key matching this pattern
 * by its hash, so widening it would stop stored keys from replaying.
 */
export const control_characters = /[\u0000-\u001f\u007f]/;

/**
 * What a name shown to people (agent, evidence source, auditor) must not hold, because the
 * console or a log would show the name as something it is not: C0 and C1 controls and DEL; bidi
 * controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what follows;
 * invisible characters (soft hyphen U+00AD, U+034F, the Hangul fillers U+115F, U+1160, U+3164,
 * U+FFA0, U+17B4, U+17B5, U+180E, U+200B–U+200D, U+2060–U+2065, the deprecated format
 * characters U+206A–U+206F, U+FEFF, the interlinear annotation marks U+FFF9–U+FFFB and the tag
 * characters U+E0000–U+E007F, which can carry hidden text); line and paragraph separators
 * U+2028, U+2029; and lone surrogates (in a `u` pattern, [\uD800-\uDFFF] matches only an
 * unpaired one). A fixed set, not \p{Cf}: property data follows Node's Unicode version.
 */
export const invisible_or_control_characters =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff\ufeff\uffa0\ufff9-\ufffb\u{e0000}-\u{e007f}]/u;

/** The first character of `text` that invisible_or_control_characters refuses, as "U+202E"; undefined when none. */
export function invisibleOrControlCharacter(text: string): string | undefined {
  const found = invisible_or_control_characters.exec(text);
  if (found === null) return undefined;
  const code_point = found[0].codePointAt(0) as number;
  return `U+${code_point.toString(16).toUpperCase().padStart(4, "0")}`;
}

function checkIdempotencyKey(value: unknown): string | undefined {
  if (typeof value !== "string" || value.length === 0) return "idempotency_key must be a non-empty string";
  if (value.length > idempotency_key_length_max) {
    return `idempotency_key is longer than ${idempotency_key_length_max} characters`;
  }
  if (control_characters.test(value)) return "idempotency_key must not contain control characters (U+0000–U+001F, U+007F)";
  return undefined;
}

/**
 * R0's word on an idempotency_key that had no JSON form as sent (PolicyCall.idempotency_key_sent):
 * the arguments carry a stand-in for it (U+FFFD for a lone surrogate), which the evidence
 * records, so the call is refused rather than decided under a key the log cannot show.
 */
export function sentKeyProblem(sent: unknown): string | undefined {
  if (sent === undefined) return undefined;
  if (typeof sent === "string" && hasLoneSurrogate(sent)) {
    return "idempotency_key must be well-formed text: it has a lone UTF-16 surrogate (recorded as U+FFFD)";
  }
  return "idempotency_key must be a non-empty string";
}

function checkPaymentId(value: unknown): string | undefined {
  if (typeof value !== "string" || !payment_id_pattern.test(value)) {
    return "payment_id must match ^pay_[A-Za-z0-9]{1,40}$";
  }
  return undefined;
}

const field_checks: Readonly<Record<string, (value: unknown) => string | undefined>> = {
  amount: checkAmount,
  receipt: checkReceipt,
  notes: checkNotes,
  idempotency_key: checkIdempotencyKey,
  payment_id: checkPaymentId,
};

/** An argument name as a refusal shows it: the name is the agent's, and may be a megabyte long. */
function shownName(name: string): string {
  return name.length <= shown_units_max ? name : `${shortened(name)} (${characterCount(name)} characters)`;
}

/** The first R0 problem with a money call's arguments, or undefined when they are sound. */
export function argumentProblem(tool: string, args: unknown, block_currency: string): string | undefined {
  if (!isPlainObject(args)) return `arguments must be an object, got ${describe(args)}`;
  const declared = declared_arguments[tool] ?? [];
  for (const name of Object.keys(args)) {
    if (!declared.includes(name)) return `argument ${shownName(name)} is not declared for ${tool}; it is refused`;
  }
  for (const name of required_arguments[tool] ?? []) {
    if (args[name] === undefined) return `${name} is required`;
  }
  for (const [name, value] of Object.entries(args)) {
    if (value === undefined) continue;
    const problem = name === "currency" ? checkCurrency(value, block_currency) : field_checks[name]?.(value);
    if (problem) return problem;
  }
  return undefined;
}
