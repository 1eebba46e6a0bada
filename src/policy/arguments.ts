// R0's argument checks: every reason names the field and the limit it broke.

import { characterCount, hasLoneSurrogate, shortened, shown_units_max } from "./text.js";
import {
  amount_max_minor,
  amount_min_minor,
  currency_pattern,
  declared_arguments,
  idempotency_key_length_max,
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

export function checkCurrency(value: unknown, block_currency: string): string | undefined {
  if (typeof value !== "string" || !currency_pattern.test(value)) {
    return "currency must be exactly three ASCII letters";
  }
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

/** C0 controls and DEL: no idempotency key has them, and PostgreSQL text cannot hold NUL. */
export const control_characters = /[\u0000-\u001f\u007f]/;

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
