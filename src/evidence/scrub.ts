// Secret scrubbing for evidence bodies: a deep copy in which values under secret-looking
// keys, values that look like credentials or card numbers, and objects with a key that looks
// like one, become "[redacted]"; a URL's password, secret-named query parameters and a secret
// written after its name in text ("password: hunter2") are replaced in place; and the RFC 8785
// text of that copy written in one walk, without making the copy.

import { stringEnd, writesKeyTwice } from "../json-text.js";
import { CanonicalJsonError, canonicalJson, canonicalKey, canonicalNumber, canonicalString, sortKeys } from "./canonical.js";

export const redacted = "[redacted]";
/** Deeper values are replaced whole: evidence bodies come from bounded JSON, so this is a bug guard. */
export const scrub_depth_max = 64;

/** Key names are compared lower-cased with '-', '_', '.' and white space removed, so `X-Api-Key`
 *  and `API Key` are `xapikey` and `apikey`. */
const secret_key_fragments = [
  "password",
  "passwd",
  "passphrase",
  "passcode",
  "secret",
  "token",
  "apikey",
  "authorization",
  "cookie",
  "cvv",
  "cvc",
  "securitycode",
  "cardcode",
  "privatekey",
  "credential",
  "sessionid",
  "accesskey",
] as const;
/** Whole names, or the end of one (`upi_pin`, `card_pin`, `sms_otp`, `otp_code`): as a fragment,
 *  "pin" would take `shipping` and `pincode` (a postal code) for secrets. */
const secret_key_suffixes = ["pin", "otp", "otpcode", "pinnumber", "otpvalue", "verificationcode", "verificationvalue"] as const;
/** Whole names only: as an ending, "pass" would take `bypass` and `compass`, and "pw" `top_w`
 *  (a width), for secrets, as "pwd" would take any name ending in it. */
const secret_key_names = new Set(["auth", "pwd", "pw", "pass", "keysecret", "signingkey", "masterkey", "xapikey", "csc", "cvn", "cvn2", "cvd", "cav2"]);
/** A URL's `?key=` holds an API key by convention (Google's `?key=AIza…`); an object's `key` is
 *  most often the name half of a name/value pair (`{"key": "colour", "value": "red"}`), so
 *  this name is secret in a query only. */
const secret_query_names = new Set(["key"]);

/** Bursar's own tokens and keys (agent, operator, auditor, webhook signing, source API, observer),
 *  wherever they stand in text: glued to a word ("x_bsr_agent_…", "ref9bsr_op_…") too, where a
 *  word boundary would not match. The prefix is distinctive enough to need none. */
export const bursar_token_source = "bsr_(?:agent|op|audit|whsec|srckey|obs)_[A-Za-z0-9_-]{20,}";
export const bursar_token_pattern = new RegExp(bursar_token_source);

/**
 * An Authorization header's scheme ("Bearer", "Basic", "Token", or written "token:") and what
 * follows it, 8 or more token characters; it is a credential when containsAuthorization says so.
 */
const authorization_pattern = /\b(?:bearer|basic|token):?\s+([A-Za-z0-9._~+/=-]{8,})/gi;
/** A digit, a symbol a token holds, or a lower-case letter followed by a capital ("dXNlcjpw"). */
const credential_mark = /[0-9._~+/=-]|[a-z][A-Z]/;
/** Longer than any word a product name or prose puts after "Basic" or "Token": a credential, whatever it holds. */
const credential_chars_min = 16;

/**
 * Whether the text holds an Authorization credential. What follows the scheme must look like a
 * credential, not a word: "Basic subscription plan", "Token reservation" and "bearer instruments"
 * are product names and prose, and stored whole; "Bearer ya29.a0AfH6", "Basic dXNlcjpwYXNz",
 * "token: 3f9a…" and "Bearer abcdefghijklmnop" (16 letters) are not. Each match starts where the
 * last ended: linear in the text.
 */
function containsAuthorization(text: string): boolean {
  for (const [, credential] of text.matchAll(authorization_pattern)) {
    if (credential!.length >= credential_chars_min || credential_mark.test(credential!)) return true;
  }
  return false;
}

const secret_value_patterns: readonly RegExp[] = [
  /rzp_(?:test|live)_[A-Za-z0-9]+/, // Razorpay key ids, also glued to a word ("key_rzp_live_…")
  // Stripe secret and restricted keys, after "_" too ("key_sk_live_…") but not inside a word
  // ("task_test_…"); their shortest form has 24 characters after the prefix.
  /(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}/,
  /AIza[0-9A-Za-z_-]{35}/, // Google API keys: "AIza" and 35 more, glued to a word too ("key=AIza…")
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/, // PEM private keys
  /\bsk-[A-Za-z0-9_-]{16,}/, // OpenAI-style API keys
  /\bgh[pousr]_[A-Za-z0-9]{20,}/, // GitHub tokens
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/, // Slack tokens
  /\bwhsec_[A-Za-z0-9+/=]{16,}/, // webhook signing secrets (Stripe's, Svix's)
  /\bAKIA[0-9A-Z]{16}\b/, // AWS access key ids
  bursar_token_pattern,
];

/**
 * Runs of base64url characters and dots. Each match starts where the last one ended and never
 * fails part-way, so finding them all is linear in the text.
 */
const dotted_run_pattern = /[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)*/g;
const jwt_header_prefix = "eyJ";
const jwt_segment_chars_min = 4;

/**
 * True when the text holds a JWT: "eyJ" at a word boundary, at least 4 base64url characters, a
 * dot, at least 4 more, and a second dot (what /\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\./
 * matches). That regex took time quadratic in the text: from every "eyJ" it scanned to the end
 * of the run looking for the dot, so a 40,000-character "eyJ-eyJ-…" held the event loop for
 * half a second and a 2 MiB delivery for minutes. Here each run is split at its dots once.
 */
function containsJwt(text: string): boolean {
  for (const [run] of text.matchAll(dotted_run_pattern)) {
    const segments = run.split(".");
    for (let i = 0; i + 2 < segments.length; i++) {
      if (segments[i + 1]!.length >= jwt_segment_chars_min && jwtHeaderEnds(segments[i]!)) return true;
    }
  }
  return false;
}

/** True when a segment ends in "eyJ" and 4 or more characters, that "eyJ" starting the segment
 *  or following a dash (the only character of a segment that makes a word boundary). */
function jwtHeaderEnds(segment: string): boolean {
  for (let at = segment.indexOf(jwt_header_prefix); at !== -1; at = segment.indexOf(jwt_header_prefix, at + 1)) {
    // The first such "eyJ" leaves the most characters after it: no later one can pass where it fails.
    if (at === 0 || segment[at - 1] === "-") return segment.length - at - jwt_header_prefix.length >= jwt_segment_chars_min;
  }
  return false;
}

/** One cheap test every string takes first; only strings it matches run the patterns above. */
const secret_value_prefilter = /bearer|basic|token|eyJ|rzp_|k_live_|k_test_|AIza|-----BEGIN|sk-|gh[pousr]_|xox|AKIA|bsr_|whsec_/i;

/** A card number has 13 to 19 digits. */
const card_digits_min = 13;
const card_digits_max = 19;
/**
 * Digits are grouped as cards are printed and typed: by single spaces (any Unicode space:
 * a no-break, thin or narrow no-break space, as locale-aware formatting writes, too; or a "+",
 * which is a space in a form body or a query: "number=4111+1111+1111+1111") or dashes (any
 * Unicode dash, a minus sign, or an invisible format character such as a zero-width space),
 * mixed ("4111 1111-1111 1111"), or by one separator used throughout the run: a dot, a slash, an
 * underscore, a tab or two spaces ("4111.1111.1111.1111"). Mixing those (and a space with them)
 * ends a run, so "10.0.0.1 10.0.0.2" or "27.10.2026 22.10.13" is not one long run of digits
 * in which some stretch passes Luhn. Each kind of joint is one number here; any other text
 * between two groups joins nothing.
 */
const joint_none = 0;
const joint_space_or_dash = 1;
const joint_two_spaces = 2;
/** The one-character joints a run uses throughout, other than a space or dash. */
const joint_characters: ReadonlyMap<string, number> = new Map([
  [".", 3],
  ["/", 4],
  ["_", 5],
  ["\t", 6],
]);
/** A space or dash joint: any Unicode space or dash (an en dash, a non-breaking hyphen), a minus
 *  sign, or an invisible format character (a zero-width space, a soft hyphen), which a pasted
 *  number may carry and which would otherwise hide one from the scan. */
const space_or_dash_pattern = /^[\p{Zs}\p{Pd}\p{Cf}\u2212]$/u;
/** Invisible format characters beside a joint ("4111\u200b 1111") are no part of it. */
const format_characters = /\p{Cf}/gu;
/** The longest gap between groups read as a joint with format characters in it, in UTF-16 units. */
const joint_with_format_units_max = 8;
const card_prefilter = /\d(?:[\p{Zs}\p{Pd}\p{Cf}\u2212\t./_+]{0,4}\d){12}/u;

/** Key names repeat across entries; remembering the verdicts keeps scrubbing cheap: whether the
 *  name is a secret's (its value is redacted), and whether the name itself holds a secret (its
 *  object is replaced). Only names up to key_verdict_chars_max are remembered: the names are the
 *  senders', and 10,000 of a megabyte each would be kept for the life of the process. */
const key_verdicts = new Map<string, boolean>();
const key_text_verdicts = new Map<string, boolean>();
const key_verdicts_max = 10_000;
const key_verdict_chars_max = 64;

/**
 * The secrets this process was configured with (the provider's key secret and webhook secret,
 * Bursar's webhook secret, operator token and master key), redacted wherever they appear, as
 * the whole string: a bare key secret ("Kq8ZrT2mWx9LpB4nYc7VdF1s") matches none of the patterns
 * above, and an agent could copy one into its notes. A value shorter than known_secret_chars_min
 * is not remembered: it would redact ordinary text.
 */
const known_secret_values = new Set<string>();
export const known_secret_chars_min = 12;

/** Remembers configured secret values for scrubbing (see known_secret_values); for the life of the process. */
export function rememberSecretValues(values: Iterable<string | undefined>): void {
  let added = false;
  for (const value of values) {
    if (value === undefined || value.length < known_secret_chars_min || known_secret_values.has(value)) continue;
    known_secret_values.add(value);
    added = true;
  }
  // A key name judged before may hold one of them.
  if (added) key_text_verdicts.clear();
}

function containsKnownSecret(value: string): boolean {
  for (const secret of known_secret_values) if (value.includes(secret)) return true;
  return false;
}

/** How many key names are remembered (for the test that long ones are not). */
export function rememberedKeyNames(): number {
  return key_verdicts.size + key_text_verdicts.size;
}

function remembered(verdicts: Map<string, boolean>, key: string, judge: (key: string) => boolean): boolean {
  const known = verdicts.get(key);
  if (known !== undefined) return known;
  const verdict = judge(key);
  if (verdicts.size < key_verdicts_max && key.length <= key_verdict_chars_max) verdicts.set(key, verdict);
  return verdict;
}

/**
 * Whether the value under `key` is replaced whole: the key's name is a secret's, and the value is
 * something. A number under a name ending in "tokens" (`max_tokens`, `input_tokens`) counts a
 * language model's tokens, and is kept.
 */
function redactedUnder(key: string, item: unknown): boolean {
  if (item === null || item === undefined || !isSecretKeyName(key)) return false;
  return !(typeof item === "number" && normalizedKeyName(key).endsWith("tokens"));
}

export function isSecretKeyName(key: string): boolean {
  return remembered(key_verdicts, key, (name) => isSecretNormalizedName(normalizedKeyName(name)));
}

/** True when a key name holds a credential or card number as text (isSecretValue of the name). */
function keyHoldsSecret(key: string): boolean {
  return remembered(key_text_verdicts, key, isSecretValue);
}

function normalizedKeyName(key: string): string {
  return key.toLowerCase().replace(/[-_.\s]/g, "");
}

function isSecretNormalizedName(normalized: string): boolean {
  return (
    secret_key_names.has(normalized) ||
    secret_key_fragments.some((fragment) => normalized.includes(fragment)) ||
    secret_key_suffixes.some((suffix) => normalized.endsWith(suffix))
  );
}

/** A query parameter's name, percent-decoded ("api%5Fkey") and with "+" read as a space, judged
 *  as a key name is. Not remembered: the names are any text's, not a body's keys. */
function isSecretQueryName(name: string): boolean {
  const decoded = /[%+]/.test(name) ? percentDecoded(name.replace(/\+/g, " ")) : name;
  const normalized = normalizedKeyName(decoded);
  return secret_query_names.has(normalized) || isSecretNormalizedName(normalized);
}

/** Luhn checksum over a string of digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let digit = digits.charCodeAt(i) - 48;
    if (double) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
    double = !double;
  }
  return sum % 10 === 0;
}

const doubled_digit = [0, 2, 4, 6, 8, 1, 3, 5, 7, 9];

/** The kind of joint the text between two groups makes, or joint_none. */
function jointKind(text: string, from: number, to: number): number {
  if (to - from === 1) {
    const code = text.charCodeAt(from);
    // The common case takes no regex; "+" is a form-encoded space.
    if (code === 32 || code === 45 || code === 43) return joint_space_or_dash;
    const joint = text[from]!;
    return joint_characters.get(joint) ?? (space_or_dash_pattern.test(joint) ? joint_space_or_dash : joint_none);
  }
  if (to - from === 2 && text.charCodeAt(from) === 32 && text.charCodeAt(from + 1) === 32) return joint_two_spaces;
  if (to - from > joint_with_format_units_max) return joint_none;
  // Format characters around a space or dash, or two of them (or one outside the BMP) alone.
  const gap = text.slice(from, to);
  const visible = gap.replace(format_characters, "");
  if (visible.length === gap.length) return joint_none;
  return visible.length === 0 ? joint_space_or_dash : jointKind(visible, 0, visible.length);
}

function isAsciiDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

function isAsciiLetter(code: number): boolean {
  return (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
}

/** The last digits read, more than a card number has (card_digits_max), each with a flag when it
 *  starts a group: a ring indexed by how many digits were read before it. */
const recent_digits_size = 32;
const starts_group_flag = 16;

/**
 * True when the text holds consecutive groups, joined by one kind of joint, that hold 13 to 19
 * digits together, pass Luhn and do not start with 0 (no issuer number does; without this 13
 * zeros would pass). A card number printed next to its CVV, expiry or a reference is such a
 * stretch of groups ("4111 1111 1111 1111 123"). Stretches start and end at group boundaries
 * only: a long unbroken run of digits (a snowflake id, a nanosecond timestamp) is a card only as
 * a whole, rather than redacted because one of its many windows passes Luhn. A group glued to a
 * letter is left out, and so ends any run it would stand in (at one end: a letter is no joint):
 * a digest's digits are glued to its hex letters, and are not a card number.
 *
 * Runs joined differently may share a group: in "0  481.7462464911" the group 481 ends a run
 * joined by two spaces and starts one joined by dots. Finding runs with one regex per kind of
 * joint missed that: a match takes its last group, and the next search starts after it. Here
 * each group is read once, in order, with the joint before it; `run_first` counts the digits
 * read before the run of groups joined by that one kind and ending at this group. A new kind of
 * joint starts a run at the group before it, which ends the old run too.
 */
function containsCardNumber(text: string): boolean {
  if (!card_prefilter.test(text)) return false;
  const recent = new Uint8Array(recent_digits_size);
  let count = 0; // digits read, of groups not glued to a letter
  let run_first = 0;
  let run_joint = joint_none;
  let previous_first = 0;
  let previous_end = -1; // -1: no group before this one that a joint could join it to
  for (let at = 0; at < text.length; ) {
    if (!isAsciiDigit(text.charCodeAt(at))) {
      at += 1;
      continue;
    }
    const start = at;
    while (isAsciiDigit(text.charCodeAt(at))) at += 1; // NaN past the end
    if (isAsciiLetter(text.charCodeAt(start - 1)) || isAsciiLetter(text.charCodeAt(at))) {
      previous_end = -1;
      continue;
    }
    const joint = previous_end === -1 ? joint_none : jointKind(text, previous_end, start);
    if (joint === joint_none) run_first = count;
    else if (joint !== run_joint) run_first = previous_first;
    run_joint = joint;
    previous_first = count;
    previous_end = at;
    recent[count++ % recent_digits_size] = text.charCodeAt(start) - 48 + starts_group_flag;
    for (let digit_at = start + 1; digit_at < at; digit_at++) recent[count++ % recent_digits_size] = text.charCodeAt(digit_at) - 48;
    if (endsCardNumber(recent, count, count - run_first)) return true;
  }
  return false;
}

/** True when a stretch of the last `run_digits` digits read, ending at the last one, is a card
 *  number. From there the Luhn sum grows leftwards digit by digit, at most 19 of them: each
 *  group costs a bounded walk, and no strings are built. */
function endsCardNumber(recent: Uint8Array, count: number, run_digits: number): boolean {
  let sum = 0;
  for (let length = 1; length <= card_digits_max && length <= run_digits; length++) {
    const entry = recent[(count - length) % recent_digits_size]!;
    const digit = entry % starts_group_flag;
    sum += length % 2 === 0 ? doubled_digit[digit]! : digit;
    // Above the flag: the digit starts a group, and is not 0.
    if (length >= card_digits_min && entry > starts_group_flag && sum % 10 === 0) return true;
  }
  return false;
}

/**
 * True when scrubbing changes the string: it holds a credential, private key or card number (the
 * whole string is replaced), or a URL's password or a secret-named query parameter (replaced in
 * place). A key for which this is true has its object replaced whole.
 */
export function isSecretValue(value: string): boolean {
  const state: ScrubState = { redactions: 0 };
  return scrubbedString(value, state) !== value;
}

/**
 * A copy of `record` without the entries whose keys themselves look secret (isSecretValue):
 * scrubbing would replace the whole object for one such key, taking every other entry with it.
 * Keys are defined (fromEntries), so even "__proto__" stays an entry rather than a prototype.
 */
export function withoutSecretKeys(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([key]) => !isSecretValue(key)));
}

/**
 * A string as stored: "[redacted]" when it holds a credential, private key or card number; else
 * with each URL password, secret query value and secret written after its name replaced by
 * "[redacted]" in place (the scheme, host, path, other parameters and the rest of the text are
 * kept), each counted; else unchanged. Replacing them cannot make a credential or card number
 * of what is left: each replaced stretch lies between characters no credential, card group or
 * JWT holds (an "=", ":", quote or white space before; a character such as "&", "#", "@", ",",
 * "}", ";", a quote, white space or the line's end after).
 */
function scrubbedString(value: string, state: ScrubState, depth = 0): string {
  if (isSecretText(value)) return redact(state);
  const json = jsonInString(value);
  if (json === too_deep) return redact(state);
  if (json !== undefined) return scrubbedJsonString(value, json, state, depth);
  const before = state.redactions;
  const text = inPlaceSecretsRedacted(value, state);
  // Only text with a "%" decodes; the replacements add none.
  if (!value.includes("%") || !hasEncodedSecret(value, text)) return text;
  state.redactions = before;
  return redact(state);
}

/** A string holding JSON nested deeper than values are scrubbed (scrub_depth_max): replaced whole, unparsed. */
const too_deep = Symbol("too deep");

/**
 * The object or array a string holds as JSON text ('{"password":"hunter2"}', as a tool's result
 * carries its data in `content[].text`), parsed; undefined when it holds none. Only text that
 * starts and ends as one (white space aside) is read, and text nested deeper than values are
 * scrubbed is not parsed at all (2 MiB of "[[[…]]]" took JSON.parse a second).
 */
function jsonInString(value: string): object | typeof too_deep | undefined {
  const first = value.trimStart()[0];
  const last = value.trimEnd().at(-1);
  if (!((first === "{" && last === "}") || (first === "[" && last === "]"))) return undefined;
  if (nestingDepth(value) > scrub_depth_max) return too_deep;
  try {
    const parsed = JSON.parse(value) as unknown;
    return typeof parsed === "object" && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** How deep a JSON text's brackets nest, read outside its strings in one pass. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code === 0x22) {
      at = stringEnd(text, at);
      if (at === -1) break; // a string left open: not JSON, and nothing deeper follows
    } else if (code === 0x7b || code === 0x5b) deepest = Math.max(deepest, ++depth);
    else if (code === 0x7d || code === 0x5d) depth--;
  }
  return deepest;
}

/**
 * A string holding JSON, scrubbed as the data it holds: as sent when nothing in it is secret, else
 * that data scrubbed, written as compact JSON (its URLs read as data, not as text). A text that
 * writes a key twice ('{"a":{"password":…},"a":1}') parses to the last one only, so what the
 * first held was never looked at: it is stored as the data parsed, scrubbed, and never as sent.
 */
function scrubbedJsonString(value: string, json: object, state: ScrubState, depth: number): string {
  const before = state.redactions;
  const scrubbed = scrubValue(json, depth + 1, state);
  return state.redactions === before && !writesKeyTwice(value, json) ? value : JSON.stringify(scrubbed);
}

/**
 * Whether the percent-decoded value, to three levels, holds a credential, private key or card
 * number: a URL's query carries one percent-encoded ("?next=%2Fcb%3Ftoken%3Dbsr_agent_…"), where
 * the patterns' word boundary fails. Or whether the decoded text (the value with its own URL
 * secrets replaced) holds a URL password or secret query value ("?next=%2Fcb%3Faccess_token%3D…"),
 * which cannot be replaced in the text as sent. Either way the whole value is replaced; an escape
 * elsewhere in a URL ("?token=…&q=a%20b") does not cost it its scheme and host.
 */
function hasEncodedSecret(value: string, text: string): boolean {
  const value_decodings = percentDecodings(value);
  if (value_decodings.some(isSecretText)) return true;
  const text_decodings = text === value ? value_decodings : percentDecodings(text);
  return text_decodings.some((decoded) => inPlaceSecretsRedacted(decoded, { redactions: 0 }) !== decoded);
}

/** The text decoded once, twice and three times, while it holds escapes that decode. */
function percentDecodings(value: string): string[] {
  const decodings: string[] = [];
  let text = value;
  for (let level = 0; level < percent_decode_levels_max && text.includes("%"); level++) {
    const decoded = percentDecoded(text);
    if (decoded === text) break;
    decodings.push(decoded);
    text = decoded;
  }
  return decodings;
}

const percent_escapes_pattern = /(?:%[0-9A-Fa-f]{2})+/g;
const percent_decode_levels_max = 3;
const utf8_decoder = new TextDecoder("utf-8", { fatal: true });

/** Each run of percent-escapes decoded as UTF-8 ("%C2%A0" is a no-break space), or byte by byte
 *  where the run is not UTF-8 (a form encoded as Latin-1: "%A0"). */
function percentDecoded(text: string): string {
  return text.replace(percent_escapes_pattern, (run) => {
    // One byte alone is ASCII, or not UTF-8: the common case takes no decoder.
    if (run.length === 3) return String.fromCharCode(Number.parseInt(run.slice(1), 16));
    const bytes = Buffer.from(run.replaceAll("%", ""), "hex");
    try {
      return utf8_decoder.decode(bytes);
    } catch {
      return bytes.toString("latin1");
    }
  });
}

function isSecretText(value: string): boolean {
  if (known_secret_values.size > 0 && containsKnownSecret(value)) return true;
  if (secret_value_prefilter.test(value) && (secret_value_patterns.some((pattern) => pattern.test(value)) || containsAuthorization(value) || containsJwt(value))) {
    return true;
  }
  return containsCardNumber(value);
}

/** The text with every URL password, secret query value and secret written after its name
 *  replaced, each counted in `state`. */
function inPlaceSecretsRedacted(text: string, state: ScrubState): string {
  return labelledSecretsRedacted(urlSecretsRedacted(text, state), state);
}

/** The text with every URL password and secret query value replaced, each counted in `state`. */
function urlSecretsRedacted(text: string, state: ScrubState): string {
  return queryValuesRedacted(urlPasswordsRedacted(text, state), state);
}

/** Where a URL's authority ends, as a URL parser reads it (at "/", "?", "#" or "\"), or where the
 *  URL ends in text (white space, a double quote, an angle bracket). */
const authority_end_pattern = /[/?#\\\s"<>]/g;

/**
 * "scheme://user:password@host" with the password replaced: between the first ":" of the
 * authority and its last "@", as a URL parser splits them ("u:p@ss@host" has the password
 * "p@ss"). Each authority is read once, from its "://" to its end, and the next "://" is looked
 * for from its last character on: linear in the text.
 */
function urlPasswordsRedacted(text: string, state: ScrubState): string {
  let out = "";
  let copied = 0;
  for (let at = text.indexOf("://"); at !== -1; ) {
    const start = at + 3;
    authority_end_pattern.lastIndex = start;
    const end = authority_end_pattern.exec(text)?.index ?? text.length;
    const authority = text.slice(start, end);
    const userinfo_end = authority.lastIndexOf("@");
    const colon = authority.indexOf(":");
    if (colon !== -1 && colon < userinfo_end) {
      const password = authority.slice(colon + 1, userinfo_end);
      if (password !== "" && password !== redacted) {
        out += `${text.slice(copied, start + colon + 1)}${redacted}`;
        copied = start + userinfo_end;
        state.redactions += 1;
      }
    }
    // The authority's last character may be the ":" of the next "://" ("a://host://u:p@h").
    at = text.indexOf("://", Math.max(start, end - 1));
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * A query parameter's name: after "?", "&" or "#" (an OAuth fragment: "#access_token=…") or at
 * the start of the text (a query or form body on its own), up to its "=". The name cannot hold
 * the characters a parameter starts with, so each is read once.
 */
const query_name_pattern = /(?:^|[?&#])([^=?&#\s"<>]*)=/g;
/** Where a query value ends: at the next "&" or "#", or where the URL ends in text. */
const query_value_end_pattern = /[&#\s"<>]/g;

/**
 * Each secret-named parameter's value replaced, up to its end. The value of any other parameter
 * is read on for parameters of its own: an unencoded URL in it ("?next=/cb?token=…") has them.
 * A replaced value is skipped: linear in the text.
 */
function queryValuesRedacted(text: string, state: ScrubState): string {
  if (!text.includes("=")) return text;
  let out = "";
  let copied = 0;
  query_name_pattern.lastIndex = 0;
  for (let match = query_name_pattern.exec(text); match !== null; match = query_name_pattern.exec(text)) {
    const value_start = query_name_pattern.lastIndex;
    if (!isSecretQueryName(match[1]!)) continue;
    query_value_end_pattern.lastIndex = value_start;
    const value_end = query_value_end_pattern.exec(text)?.index ?? text.length;
    const value = text.slice(value_start, value_end);
    if (value !== "" && value !== redacted) {
      out += `${text.slice(copied, value_start)}${redacted}`;
      copied = value_end;
      state.redactions += 1;
    }
    query_name_pattern.lastIndex = value_end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * Words that name a secret as key names do, but are ordinary words too ("Token: reservation for
 * Diwali", "PIN: the blue one", "Cookie: oatmeal"): after one of these alone, a value is a
 * secret only when its first word looks like a credential, as after an Authorization scheme.
 */
const ordinary_word_labels = new Set(["token", "auth", "authorization", "pin", "otp", "cookie", "cookies", "credential", "credentials", "pass"]);
/** The second word of a two-word name that makes it a secret's when the first word alone already is
 *  one ("Secret key", "Auth token", "PIN number"); "Secret Santa" and "Password manager" are not. */
const credential_nouns = new Set(["key", "token", "secret", "id", "code", "phrase", "number", "value"]);
const label_chars_max = 64;
/** Every name judged secret contains one of these (case aside): only a ":" or "=" shortly after
 *  one (label_span_max) can follow such a name. */
const label_keyword_pattern = /pass|pw|secret|token|key|auth|cookie|cv[vcnd]|csc|cav2|code|credential|session|pin|otp|verification/gi;
/** From the end of a keyword in a name to its ":" or "=", at most: two names, the spaces between, and a quote and spaces after. */
const label_span_max = 2 * label_chars_max + 8;
const label_separator_pattern = /[:=]/g;
const line_end_pattern = /[\r\n]/g;
/** Where a value ends after "=" (an environment line, a form or cookie pair) or after a quoted name
 *  (JSON or a dict written in text): white space, or what ends a pair. */
const assigned_value_end_pattern = /[\s&;,"'<>]/g;
const member_value_end_pattern = /[\s,}\]]/g;

/** A character of a name in text: "X-Api-Key", "db.password", "client_secret". */
function isLabelChar(code: number): boolean {
  return isAsciiLetter(code) || isAsciiDigit(code) || code === 0x5f || code === 0x2e || code === 0x2d;
}

/** The start of the name that ends just before `end` (a run of label characters), or -1 when
 *  there is none or it is longer than any name. */
function labelStart(text: string, end: number): number {
  let start = end;
  while (start > 0 && end - start <= label_chars_max && isLabelChar(text.charCodeAt(start - 1))) start -= 1;
  return start === end || end - start > label_chars_max ? -1 : start;
}

/** Skips spaces and tabs leftwards from `at` (exclusive), at most four. */
function spacesBefore(text: string, at: number): number {
  let start = at;
  while (start > 0 && at - start < 4 && (text[start - 1] === " " || text[start - 1] === "\t")) start -= 1;
  return start;
}

/**
 * The name written before a ":" or "=" at `separator` when it is a secret's, normalized, or
 * undefined: one word ("password", "X-Api-Key"), two ("API key", "Session ID", "Secret key"),
 * or one in quotes ('"api_key"', "'pin'"), as JSON or a dict printed in text writes it.
 */
function secretLabel(text: string, separator: number): { name: string; quoted: boolean } | undefined {
  let end = spacesBefore(text, separator);
  let quote = "";
  if (text[end - 1] === '"' || text[end - 1] === "'") {
    quote = text[end - 1]!;
    end -= 1;
    if (text[end - 1] === "\\") end -= 1; // JSON inside a JSON string: \"password\":
  }
  const start = labelStart(text, end);
  if (start === -1) return undefined;
  const name = text.slice(start, end);
  if (quote !== "") {
    const opened = text[start - 1] === quote || (text[start - 1] === "\\" && text[start - 2] === quote);
    return opened && isSecretKeyName(name) ? { name: normalizedKeyName(name), quoted: true } : undefined;
  }
  if (isSecretKeyName(name)) return { name: normalizedKeyName(name), quoted: false };
  const first_end = spacesBefore(text, start);
  if (first_end === start || first_end < start - 2) return undefined;
  const first_start = labelStart(text, first_end);
  if (first_start === -1) return undefined;
  const first = text.slice(first_start, first_end);
  const joined = normalizedKeyName(`${first}${name}`);
  if (!isSecretNormalizedName(joined)) return undefined;
  return !isSecretKeyName(first) || credential_nouns.has(normalizedKeyName(name)) ? { name: joined, quoted: false } : undefined;
}

/** The first index at or after `from` that `pattern` (global) matches, or the text's length. */
function indexOf(pattern: RegExp, text: string, from: number): number {
  pattern.lastIndex = from;
  return pattern.exec(text)?.index ?? text.length;
}

/**
 * Where a text's lines end, and where their text ends before trailing white space, each found once
 * however many values on a line ask: a 1 MiB line of "Token: word Token: word …" would otherwise
 * be scanned to its end once for every name on it.
 */
class LineEnds {
  private line_end = -1;
  private text_end = -1;

  constructor(private readonly text: string) {}

  /** The end of the line `at` is on (a "\r" or "\n", or the text's end). */
  lineEnd(at: number): number {
    if (this.line_end < at) {
      this.line_end = indexOf(line_end_pattern, this.text, at);
      this.text_end = -1;
    }
    return this.line_end;
  }

  /** lineEnd(at), less the line's trailing white space; never before `at`. */
  textEnd(at: number): number {
    const line_end = this.lineEnd(at);
    if (this.text_end === -1) {
      this.text_end = line_end;
      while (this.text_end > 0 && /\s/.test(this.text[this.text_end - 1]!)) this.text_end -= 1;
    }
    return Math.max(at, this.text_end);
  }
}

/** Where a value quoted with `quote` ends: its closing quote, or `limit`; "\\" escapes a character. */
function quotedEnd(text: string, from: number, limit: number, quote: string): number {
  for (let at = from; at < limit; at++) {
    if (text[at] === quote) return at;
    if (text[at] === "\\") at += 1;
  }
  return limit;
}

/**
 * Where a string ends in JSON written inside a JSON string's text, whose quotes are written \"
 * and backslashes \\ there (the value hun"ter is \"hun\\\"ter\"): at the next \" that no inner
 * backslash escapes, or at `limit`.
 */
function escapedStringEnd(text: string, from: number, limit: number): number {
  for (let at = from; at < limit; ) {
    if (text[at] !== "\\") at += 1;
    else if (text[at + 1] === '"') return at;
    else if (text[at + 1] === "\\") at += text[at + 2] === "\\" ? 4 : 3; // an inner backslash and what it escapes
    else at += 2;
  }
  return limit;
}

/** Where the value after a name starts and ends: a quoted value to its closing quote on its line;
 *  after a quoted name, to the member's end; after "=", to the pair's end; after ":", to the
 *  line's end. */
function labelledValue(text: string, separator: number, quoted_name: boolean, lines: LineEnds): { start: number; end: number } {
  let start = separator + 1;
  while (text[start] === " " || text[start] === "\t") start += 1;
  const escaped = text[start] === "\\" && text[start + 1] === '"';
  const quote = escaped ? '"' : text[start];
  if (quote === '"' || quote === "'" || quote === "`") {
    const opened = start + (escaped ? 2 : 1);
    const line_end = lines.lineEnd(opened);
    const end = escaped ? escapedStringEnd(text, opened, line_end) : quotedEnd(text, opened, line_end, quote);
    return { start: opened, end };
  }
  if (quoted_name) return { start, end: indexOf(member_value_end_pattern, text, start) };
  if (text[separator] === "=") return { start, end: indexOf(assigned_value_end_pattern, text, start) };
  return { start, end: lines.textEnd(start) };
}

/**
 * Whether the value written after a secret's name is the secret: any value but a count of a
 * model's tokens ("max_tokens: 4096, temperature: 0.2"), and after an ordinary word (ordinary_word_labels) only one
 * whose first word looks like a credential. Reads no further into the value than it must: many
 * names on one long line each have a value to the line's end.
 */
function isLabelledSecret(name: string, text: string, start: number, end: number): boolean {
  if (start >= end || text.startsWith(redacted, start)) return false;
  if (name.endsWith("tokens") && startsWithCount(text, start, end)) return false;
  if (!ordinary_word_labels.has(name)) return true;
  const first_word = text.slice(start, Math.min(end, start + credential_chars_min)).split(/\s/, 1)[0]!;
  return first_word.length >= credential_chars_min || credential_mark.test(first_word);
}

/** True when the first word of text[start, end) is digits, grouped by "," or "_" ("4096",
 *  "1,200", "4096, temperature: 0.2"). */
function startsWithCount(text: string, start: number, end: number): boolean {
  if (!isAsciiDigit(text.charCodeAt(start))) return false;
  for (let at = start + 1; at < end; at++) {
    const code = text.charCodeAt(at);
    if (code === 0x20 || code === 0x09) return true;
    if (!isAsciiDigit(code) && code !== 0x2c && code !== 0x5f) return false;
  }
  return true;
}

/**
 * Each secret written after its name in text replaced in place: "password: hunter2",
 * "X-Api-Key: 3f9a…", "Cookie: sid=…", "DB_PASSWORD=hunter2", '"client_secret": "…"'. A name is
 * judged as a key's (isSecretKeyName). Each ":" or "=" is looked at once, with a bounded look
 * back, the search goes on after a replaced value, and a kept value is read no further than its
 * first word: linear in the text.
 */
function labelledSecretsRedacted(text: string, state: ScrubState): string {
  if (!text.includes(":") && !text.includes("=")) return text;
  label_keyword_pattern.lastIndex = 0;
  let keyword = label_keyword_pattern.exec(text);
  if (keyword === null) return text;
  let keyword_end = -1; // where the last keyword before the separator ends
  const lines = new LineEnds(text);
  let out = "";
  let copied = 0;
  label_separator_pattern.lastIndex = 0;
  for (let match = label_separator_pattern.exec(text); match !== null; match = label_separator_pattern.exec(text)) {
    const separator = match.index;
    while (keyword !== null && keyword.index < separator) {
      keyword_end = keyword.index + keyword[0].length;
      keyword = label_keyword_pattern.exec(text);
    }
    if (keyword_end === -1 || separator - keyword_end > label_span_max) continue; // no name of a secret's ends here
    if (text.startsWith("//", separator + 1)) continue; // a URL's scheme
    const label = secretLabel(text, separator);
    if (label === undefined) continue;
    const value = labelledValue(text, separator, label.quoted, lines);
    if (!isLabelledSecret(label.name, text, value.start, value.end)) continue;
    out += `${text.slice(copied, value.start)}${redacted}`;
    copied = value.end;
    state.redactions += 1;
    label_separator_pattern.lastIndex = value.end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

interface ScrubState {
  redactions: number;
}

function redact(state: ScrubState): string {
  state.redactions += 1;
  return redacted;
}

/** Integers from here up are rounded when parsed: their digits as sent are gone. */
const exact_integer_max = Number.MAX_SAFE_INTEGER;
/** The least integer with more digits than a card number has. */
const past_card_digits = 10 ** card_digits_max;

/** A card number can arrive as a JSON number; integers of 13+ digits are never amounts here. A
 *  number has no CVV beside it, so only the whole of it is a card number. Past 2^53 a 17- to
 *  19-digit card number parses to a rounded neighbour that fails Luhn while keeping most of the
 *  number's digits, so any integer of that size is taken for one. */
function isSecretNumber(value: number): boolean {
  const magnitude = Math.abs(value);
  if (!Number.isInteger(value) || magnitude < 1e12) return false;
  if (magnitude > exact_integer_max) return magnitude < past_card_digits;
  return String(magnitude).length <= card_digits_max && luhnValid(String(magnitude));
}

function scrubValue(value: unknown, depth: number, state: ScrubState): unknown {
  if (depth > scrub_depth_max) return redact(state);
  if (typeof value === "string") return scrubbedString(value, state, depth);
  if (typeof value === "number") return isSecretNumber(value) ? redact(state) : value;
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => scrubValue(item, depth + 1, state));
  const source = value as { toJSON?: () => unknown };
  if (typeof source.toJSON === "function") return scrubValue(source.toJSON(), depth + 1, state);
  const keys = Object.keys(value);
  if (keys.some(keyHoldsSecret)) return redact(state);
  const copy: Record<string, unknown> = {};
  for (const key of keys) {
    const item = (value as Record<string, unknown>)[key];
    const scrubbed = redactedUnder(key, item) ? redact(state) : scrubValue(item, depth + 1, state);
    // JSON.parse makes "__proto__" an own key; assigning it would set the copy's prototype
    // instead, dropping the key from the stored body and its hash, so that one key is defined.
    if (key === "__proto__") Object.defineProperty(copy, key, { value: scrubbed, enumerable: true, writable: true, configurable: true });
    else copy[key] = scrubbed;
  }
  return copy;
}

/** A deep copy of `value` with secrets replaced by "[redacted]", and how many were replaced. */
export function scrubCounting<T>(value: T): { value: T; redactions: number } {
  const state: ScrubState = { redactions: 0 };
  const copy = scrubValue(value, 0, state) as T;
  return { value: copy, redactions: state.redactions };
}

/** A deep copy of `value` with secrets replaced by "[redacted]"; the input is not changed. */
export function scrub<T>(value: T): T {
  return scrubCounting(value).value;
}

const redacted_text = canonicalString(redacted);

/** Met by the one-walk path where the copy would not be plain data (a `toJSON` member): that
 *  value takes the copy-then-serialize path, so both always give the same text. */
class NotPlainData extends Error {}

function redactedText(state: ScrubState): string {
  state.redactions += 1;
  return redacted_text;
}

/**
 * The text of one value of the scrubbed copy, or undefined where canonical JSON leaves the value
 * out (undefined, a function or a symbol: skipped in an object, null in an array).
 */
function scrubbedText(value: unknown, depth: number, state: ScrubState): string | undefined {
  if (depth > scrub_depth_max) return redactedText(state);
  switch (typeof value) {
    case "string":
      return canonicalString(scrubbedString(value, state, depth));
    case "number":
      return isSecretNumber(value) ? redactedText(state) : canonicalNumber(value);
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      throw new CanonicalJsonError("a bigint has no JSON form");
    case "object":
      break;
    default:
      return undefined;
  }
  if (value === null) return "null";
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      // A hole stays a hole in scrub's copy (Array#map skips it) and is null in canonical JSON.
      const text = i in value ? scrubbedText(value[i], depth + 1, state) : "null";
      out += `${i > 0 ? "," : ""}${text ?? "null"}`;
    }
    return `${out}]`;
  }
  if ("toJSON" in value) throw new NotPlainData();
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object);
  // A key can carry a secret too ({"4111 1111 1111 1111": "visa"}): renaming it could collide
  // with another key, so the object is replaced whole.
  if (keys.some(keyHoldsSecret)) return redactedText(state);
  sortKeys(keys);
  let out = "{";
  let first = true;
  for (const key of keys) {
    const item = object[key];
    const text = redactedUnder(key, item) ? redactedText(state) : scrubbedText(item, depth + 1, state);
    if (text === undefined) continue;
    out += `${first ? "" : ","}${canonicalKey(key)}:${text}`;
    first = false;
  }
  return `${out}}`;
}

/**
 * `canonicalJson(scrub(value))` and the number of values replaced, in one walk and without the
 * copy (a property test holds the two side by side). Evidence bodies take this path on append.
 * Values are read in key order, so the two agree on data, not on getters with side effects.
 */
export function scrubbedCanonicalJson(value: unknown): { text: string; redactions: number } {
  const state: ScrubState = { redactions: 0 };
  try {
    const text = scrubbedText(value, 0, state);
    if (text !== undefined) return { text, redactions: state.redactions };
  } catch (error) {
    if (!(error instanceof NotPlainData)) throw error;
  }
  const copied = scrubCounting(value);
  return { text: canonicalJson(copied.value), redactions: copied.redactions };
}
