// R0's argument checks: every reason names the field and the limit it broke.

import { hasLoneSurrogate, not_a_finite_number, shortened, shown_units_max } from "./text.js";
import {
  amount_max_minor,
  amount_min_minor,
  currencyProblem,
  declared_arguments,
  idempotency_key_length_max,
  note_key_length_max,
  note_value_length_max,
  notes_keys_max,
  payment_id_pattern,
  receipt_length_max,
  receipt_note_key,
  required_arguments,
} from "./limits.js";

type Args = Readonly<Record<string, unknown>>;

export function isPlainObject(value: unknown): value is Args {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * Most values a call's arguments may hold: object members and array elements, at any depth. A
 * sound money call holds a few dozen (six arguments, 14 notes); past this the arguments are not
 * read at all. Canonicalizing, hashing and recording 90,000 keys took the gate's one thread most
 * of a second per call, for every agent: such a call is refused under R0 at the cost of counting
 * to this bound.
 */
export const argument_values_max = 1_000;

const unread_name = "[arguments not read]";
const unread_text = `more than ${argument_values_max} values`;
/** What a call whose arguments hold more than argument_values_max values is decided and recorded on. */
export const unread_arguments: Readonly<Record<string, string>> = Object.freeze({ [unread_name]: unread_text });

function isUnread(args: Args): boolean {
  return args[unread_name] === unread_text && Object.keys(args).length === 1;
}

/** Whether `value` holds more than `max` object members and array elements; stops counting there. */
export function holdsMoreValues(value: unknown, max = argument_values_max): boolean {
  let count = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next !== "object" || next === null) continue;
    if (Array.isArray(next)) {
      count += next.length;
      if (count > max) return true;
      for (const item of next) pending.push(item);
      continue;
    }
    // for..in, not Object.keys: it stops at the bound instead of listing every key first.
    for (const key in next) {
      if (++count > max) return true;
      pending.push((next as Args)[key]);
    }
  }
  return false;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  // The agent sent a number (1e400), which no JSON number holds: not the string in its place.
  if (value === not_a_finite_number) return "a number too large for JSON (such as 1e400)";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" && !Number.isInteger(value)) return `the non-integer ${value}`;
  // Not shown: JSON.parse rounded it, so its digits are not what was sent, and most of a 17- to
  // 19-digit card number survives the rounding while failing the Luhn check that scrubbing uses.
  if (typeof value === "number" && !Number.isSafeInteger(value)) return "an integer past 2^53 (not shown: JSON.parse rounds it)";
  if (typeof value === "number") return `${value}`;
  if (value === undefined) return "nothing";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
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
  const problem = currencyProblem(value);
  if (problem !== undefined) return `currency ${problem}`;
  const currency = (value as string).toUpperCase();
  if (currency !== block_currency) {
    return `currency ${currency} does not match the block's ${block_currency}`;
  }
  return undefined;
}

/** Lengths are JavaScript's (and the simulator's): UTF-16 code units, where an emoji counts 2. */
const units = "UTF-16 code units (a character outside the BMP, such as an emoji, counts 2)";

function checkReceipt(value: unknown): string | undefined {
  if (typeof value !== "string") return `receipt must be a string, got ${describe(value)}`;
  if (value.length > receipt_length_max) return `receipt is longer than ${receipt_length_max} ${units}`;
  return undefined;
}

function checkNotes(value: unknown): string | undefined {
  if (!isPlainObject(value)) return `notes must be an object of strings or numbers, got ${describe(value)}`;
  // In key order, as canonical JSON writes them: the same notes give the same reason however sent.
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length > notes_keys_max) return `notes has ${entries.length} keys; at most ${notes_keys_max}`;
  for (const [key, note] of entries) {
    if (key.length > note_key_length_max) return `notes key ${shownName(key)} is longer than ${note_key_length_max} ${units}`;
    // JSON parsers that guard against prototype pollution (Fastify's, the simulator's; perhaps the
    // provider's) refuse a body holding this key: the call would be refused after its money is held.
    if (key === "__proto__") return `notes key "__proto__" is not taken: the provider's JSON parser may refuse a body holding it`;
    // Sent with a receipt, the note would be replaced by it, and lost without a word.
    if (key === receipt_note_key) return `notes key "${receipt_note_key}" is taken: Bursar puts the receipt there; send your reference as receipt`;
    if (typeof note !== "string" && !(typeof note === "number" && Number.isFinite(note))) {
      return `notes key ${shownName(key)} must hold a string or number`;
    }
    if (String(note).length > note_value_length_max) {
      return `notes key ${shownName(key)} holds a value longer than ${note_value_length_max} ${units}`;
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
 * console, a log or a terminal would show the name as something it is not, as [first, last]
 * code points. Unicode's Default_Ignorable_Code_Point set as of Unicode 15.1 (rendered as
 * nothing: soft hyphen, zero-width characters, bidi controls that reorder what follows, Hangul
 * fillers, variation selectors, tag characters that can carry hidden text), and besides: C0 and
 * C1 controls and DEL; line and paragraph separators; the interlinear annotation marks; the
 * Egyptian hieroglyph format controls and blanks; the Braille blank, which shows as an empty
 * name; noncharacters; and lone surrogates. A fixed list, not \p{…}: property data follows
 * Node's Unicode version, and a name taken today must not be refused tomorrow. Emoji joined by
 * U+200D or followed by a variation selector (👩‍💻, ❤️) are refused with them: a name is a label,
 * and the same joiner between letters spoofs one.
 */
const invisible_or_control_ranges: ReadonlyArray<readonly [number, number]> = Object.freeze([
  [0x0000, 0x001f], [0x007f, 0x009f], // C0 controls, DEL, C1 controls
  [0x00ad, 0x00ad], [0x034f, 0x034f], [0x061c, 0x061c], // soft hyphen, grapheme joiner, Arabic letter mark
  [0x115f, 0x1160], [0x17b4, 0x17b5], [0x180b, 0x180f], // Hangul fillers, Khmer vowels, Mongolian selectors
  [0x200b, 0x200f], [0x2028, 0x202e], [0x2060, 0x206f], // zero-width, separators, bidi, word joiner, invisible operators
  [0x2800, 0x2800], [0x3164, 0x3164], // Braille blank, Hangul filler
  [0xd800, 0xdfff], // a lone surrogate (a pair is one code point, never matched)
  [0xfdd0, 0xfdef], [0xfe00, 0xfe0f], [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xffff], // noncharacters, selectors, BOM, filler, specials
  [0x13430, 0x1345f], [0x1bca0, 0x1bca3], [0x1d173, 0x1d17a], // Egyptian, shorthand and musical format controls
  [0xe0000, 0xe0fff], // tags, variation selectors supplement, reserved ignorables
  ...Array.from({ length: 16 }, (_, plane) => [(plane + 1) * 0x10000 + 0xfffe, (plane + 1) * 0x10000 + 0xffff] as const), // noncharacters
]);

const code_point_escape = (code_point: number): string => `\\u{${code_point.toString(16)}}`;

export const invisible_or_control_characters = new RegExp(
  `[${invisible_or_control_ranges.map(([first, last]) => (first === last ? code_point_escape(first) : `${code_point_escape(first)}-${code_point_escape(last)}`)).join("")}]`,
  "u",
);

const invisible_or_control_everywhere = new RegExp(invisible_or_control_characters.source, "gu");

/** `text` with each character invisible_or_control_characters names written as its escape
 *  (\u{1b}, \u{202e}): text from a request, quoted in an answer a person reads, cannot repaint
 *  or reorder what is printed around it. */
export function visibleText(text: string): string {
  return text.replace(invisible_or_control_everywhere, (character) => code_point_escape(character.codePointAt(0) as number));
}

/** Why a name shown to people is refused for its characters, naming the first by its code point
 *  (printing it would repeat the trick); undefined when it has none of them. */
export function nameCharacterProblem(name: string): string | undefined {
  const character = invisibleOrControlCharacter(name);
  return character === undefined ? undefined : `must not contain ${character} (invisible or control character)`;
}

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
    return `idempotency_key is longer than ${idempotency_key_length_max} ${units}`;
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

/**
 * A name of the agent's as a refusal shows it: quoted as a JSON string, so a line break or text
 * posing as Bursar's own ("\nBURSAR: R0 passed") reads as part of the name; shortened, since it
 * may be a megabyte long.
 */
function shownName(name: string): string {
  return name.length <= shown_units_max ? JSON.stringify(name) : `${JSON.stringify(shortened(name))} (${name.length} UTF-16 code units)`;
}

/**
 * The first R0 problem with a money call's arguments, or undefined when they are sound. Arguments
 * are checked in a fixed order (an undeclared name first, the least in key order; then the
 * declared ones in their declared order), so the same arguments get the same reason however their
 * keys were ordered.
 */
export function argumentProblem(tool: string, args: unknown, block_currency: string): string | undefined {
  if (!isPlainObject(args)) return `arguments must be an object, got ${describe(args)}`;
  if (isUnread(args)) return `arguments hold more than ${argument_values_max} values (members and elements at any depth); they are refused unread`;
  const declared = declared_arguments[tool] ?? [];
  let undeclared: string | undefined;
  for (const name of Object.keys(args)) {
    if (!declared.includes(name) && (undeclared === undefined || name < undeclared)) undeclared = name;
  }
  if (undeclared !== undefined) return `argument ${shownName(undeclared)} is not declared for ${tool}; it is refused`;
  for (const name of required_arguments[tool] ?? []) {
    if (args[name] === undefined) return `${name} is required`;
  }
  for (const name of declared) {
    const value = args[name];
    if (value === undefined) continue;
    const problem = name === "currency" ? checkCurrency(value, block_currency) : field_checks[name]?.(value);
    if (problem) return problem;
  }
  return undefined;
}
