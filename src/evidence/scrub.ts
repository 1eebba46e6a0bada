// Secret scrubbing for evidence bodies: a deep copy in which values under secret-looking
// keys or beside a secret's name held apart ({"name": "DB_PASSWORD", "value": …}), values that
// look like credentials or card numbers, and objects with a key that looks like one, become
// "[redacted]"; a URL's password, secret-named query parameters, a secret written after its
// name in text ("password: hunter2") and a YAML pair's or HTML tag's value beside a secret's
// name are replaced in place; and the RFC 8785 text of that copy written in one walk, without
// making the copy.

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
  "secretkey",
] as const;
/** The end of a name, where a fragment anywhere would take an id for the key (`signing_key_id`,
 *  `master_key_id`): `X-Auth-Key`, an Azure connection string's `AccountKey=`,
 *  `Ocp-Apim-Subscription-Key`, `x-functions-key`. */
const secret_key_endings = ["authkey", "accountkey", "subscriptionkey", "functionskey", "encryptionkey", "masterkey", "signingkey"] as const;
/** Whole names, or the end of one (`upi_pin`, `card_pin`, `sms_otp`, `otp_code`): as a fragment,
 *  "pin" would take `shipping` and `pincode` (a postal code) for secrets. */
const secret_key_suffixes = ["pin", "otp", "otpcode", "pinnumber", "otpvalue", "verificationcode", "verificationvalue"] as const;
/** What a name ends in when it ends in a secret's word (endsInSecretWord). */
const secret_word_endings: readonly string[] = [...secret_key_fragments, ...secret_key_endings];
/** Whole names only: as an ending, "pass" would take `bypass` and `compass`, and "pw" `top_w`
 *  (a width), for secrets, as "pwd" would take any name ending in it. */
const secret_key_names = new Set(["auth", "pwd", "pw", "pass", "keysecret", "xapikey", "csc", "cvn", "cvn2", "cvd", "cav2"]);
/** The last part of a name split at "-", "_", "." or white space, that names a password
 *  (`MYSQL_PWD`, `smtp-pw`): as an ending without a break before it, "pwd" would be any word's. */
const secret_name_last_parts = new Set(["pwd", "pw"]);
/** What a last part "pass" follows when it is a password's (`DB_PASS`, `SMTP_PASS`), and not
 *  a ticket's (`boarding_pass`, `season_pass`) or a step's (`first_pass`). */
const password_owners = new Set(["db", "database", "mysql", "postgres", "pg", "redis", "smtp", "ftp", "sftp", "ssh", "imap", "pop", "mail", "ldap", "proxy", "vpn", "wifi", "admin", "root", "user", "login", "app", "api",
  "vault", "sudo", "become", "keystore", "truststore", "ssl", "tls", "key", "bind", "mongo", "mongodb", "rabbitmq", "amqp", "mq", "kafka", "elastic",
  "jdbc", "oracle", "mssql", "sql", "git", "registry", "docker", "npm", "service", "svc", "bot", "master", "replica", "backup", "aws", "gcp", "azure"]);
/** A name/value pair held apart: an object whose member under one of these names holds a
 *  secret's name (namesPairSecret) has the values under pair_value_keys redacted
 *  (`{"name": "DB_PASSWORD", "value": "…"}`: a Kubernetes or ECS env entry, a HAR header;
 *  `{"key": "API_TOKEN", "value": "…"}`: Vercel's and Terraform's variables, Postman's auth;
 *  CloudFormation's `ParameterKey`/`ParameterValue` and `OutputKey`/`OutputValue`, Elastic
 *  Beanstalk's `OptionName`/`Value`, AWS SSM's `Type: SecureString`; a form field's
 *  `{"name"|"label": "Password", "value": "…"}`, a browser tool's `{"element": "Password
 *  field", "text": "…"}` or `{"selector": "#password", "value": "…"}`). Compared as key names
 *  are (normalizedKeyName). */
const pair_name_keys = new Set(["name", "key", "type", "parameterkey", "parametername", "optionname", "outputkey", "variable", "varname", "field", "fieldname", "label", "header", "headername", "element", "selector"]);
const pair_value_keys = new Set(["value", "val", "parametervalue", "optionvalue", "outputvalue", "text"]);
/** Members that mark the value beside them secret when they hold `true`, whatever its name:
 *  GitLab's `masked`, Terraform's `sensitive`, Azure DevOps' `isSecret` (not `hidden`: a grid's
 *  hidden column is no secret). */
const pair_flag_keys = new Set(["masked", "sensitive", "issensitive", "secret", "issecret"]);
/** What a name held as data may end with when it is a secret's besides a secret's word
 *  (namesPairSecret): plurals, a one-time code's names and AWS SSM's encrypted type. */
const pair_secret_name_endings: readonly string[] = ["secrets", "credentials", "onetimecode", "authenticationcode", "securestring"];
/** Words a form field's description ends with after what it holds ("Password input"). */
const field_words = new Set(["input", "field", "textbox", "box", "text", "entry", "area", "textarea"]);

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
 *  name is a secret's (its value is redacted), and what else it tells (keyFacts: whether the
 *  name itself holds a secret, so its object is replaced, and its part in a name/value pair).
 *  Only names up to key_verdict_chars_max are remembered: the names are the senders', and
 *  10,000 of a megabyte each would be kept for the life of the process. */
const key_verdicts = new Map<string, boolean>();
const key_facts = new Map<string, number>();
/** The same for names written in text before a ":" or "=" (isSecretLabelName). */
const label_verdicts = new Map<string, boolean>();
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
  if (added) key_facts.clear();
}

function containsKnownSecret(value: string): boolean {
  for (const secret of known_secret_values) if (value.includes(secret)) return true;
  return false;
}

/** How many key names are remembered (for the test that long ones are not). */
export function rememberedKeyNames(): number {
  return key_verdicts.size + key_facts.size + label_verdicts.size;
}

function remembered<T>(verdicts: Map<string, T>, key: string, judge: (key: string) => T): T {
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

/** What a key's name tells of its object, as flags (keyFacts). */
const key_holds_secret = 1;
const key_names_pair = 2;
const key_holds_pair_value = 4;
const key_flags_pair = 8;

/**
 * Whether a key holds a credential or card number as text (isSecretValue of the name: its object
 * is replaced whole), and whether it is the name's or the value's member of a name/value pair
 * held apart (pair_name_keys, pair_value_keys), as flags, remembered: one look-up per key.
 */
function keyFacts(key: string): number {
  return remembered(key_facts, key, judgeKeyFacts);
}

function judgeKeyFacts(key: string): number {
  const normalized = normalizedKeyName(key);
  const holds_secret = isSecretValue(key) ? key_holds_secret : 0;
  const pair = (pair_name_keys.has(normalized) ? key_names_pair : 0) | (pair_value_keys.has(normalized) ? key_holds_pair_value : 0);
  return holds_secret | pair | (pair_flag_keys.has(normalized) ? key_flags_pair : 0);
}

/** An object with a key that holds a secret: it is replaced whole, as renaming the key could
 *  collide with another ({"4111 1111 1111 1111": "visa"}). */
const replaced_whole = Symbol("replaced whole");

/**
 * What an object's keys decide before its values are read: replaced_whole when a key holds a
 * secret; else the secret's name its name/value pair holds (`{"name": "DB_PASSWORD", "value":
 * "…"}`: "DB_PASSWORD"), or the flag that marks its value secret (`{"masked": true, "value":
 * "…"}`: "masked"), so the pair's value is redacted; else undefined. The names are data, not
 * keys, so their verdicts are not remembered: a list of a million users' names would fill the
 * memo that keeps key names cheap.
 */
function keysVerdict(object: Record<string, unknown>, keys: readonly string[]): typeof replaced_whole | string | undefined {
  let facts = 0;
  for (const key of keys) {
    const fact = keyFacts(key);
    if ((fact & key_holds_secret) !== 0) return replaced_whole;
    facts |= fact;
  }
  if ((facts & key_holds_pair_value) === 0 || (facts & (key_names_pair | key_flags_pair)) === 0) return undefined;
  for (const key of keys) {
    const fact = keyFacts(key);
    const item = object[key];
    if ((fact & key_flags_pair) !== 0 && item === true) return key;
    if ((fact & key_names_pair) !== 0 && typeof item === "string" && namesPairSecret(item)) return item;
  }
  return undefined;
}

/**
 * Whether a name held as data (a pair's name, a YAML pair's, an HTML tag's) is a secret's: read
 * lower-cased as letters and digits only, and without a form field's word after it ("input"), it
 * ends with a secret's word (endsInSecretWord, pair_secret_name_endings), is one of the key-name
 * rule's whole names, or names a password as the key-name rule's last parts do. Only the end
 * counts, where the key-name rule takes a word anywhere: such names are often prose ("API token top-up", "Secret Santa",
 * "password_min_length", "gen_ai.client.token.usage"), and a value beside them is no secret; so
 * a count of a model's tokens ("max_tokens") is no secret's name here.
 */
function namesPairSecret(name: string): boolean {
  const words = name.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((word) => word !== "");
  while (words.length > 1 && field_words.has(words.at(-1)!)) words.pop();
  const joined = words.join("");
  if (secret_key_names.has(joined) || namesPassword(name)) return true;
  return endsInSecretWord(joined, words.at(-1) ?? "") || pair_secret_name_endings.some((ending) => joined.endsWith(ending));
}

/**
 * Whether a name, normalized (`joined`), ends in a secret's word: a fragment of the key-name
 * rule or one of its endings (`api_key`, `DB_PASSWORD`, `X-Auth-Key`), or a PIN's or OTP's name,
 * as its own last part (`last_part`: `UPI PIN`, `card_pin`, so that `Spin` and `Chopin` are not)
 * where the name is that short.
 */
function endsInSecretWord(joined: string, last_part: string): boolean {
  if (secret_word_endings.some((ending) => joined.endsWith(ending))) return true;
  return secret_key_suffixes.some((suffix) => (suffix.length > 3 ? joined.endsWith(suffix) : last_part === suffix));
}

/** Whether the value under `key` is replaced whole: by its own name (redactedUnder) or, when
 *  the object's pair holds a secret (`pair_secret`: keysVerdict), as the pair's value. */
function redactedIn(key: string, item: unknown, pair_secret: string | undefined): boolean {
  if (redactedUnder(key, item)) return true;
  return pair_secret !== undefined && item !== null && item !== undefined && (keyFacts(key) & key_holds_pair_value) !== 0;
}

export function isSecretKeyName(key: string): boolean {
  return remembered(key_verdicts, key, namesSecret);
}

/** Whether a name is a secret's (isSecretKeyName), not remembered. */
function namesSecret(name: string): boolean {
  return isSecretNormalizedName(normalizedKeyName(name)) || namesPassword(name);
}

/** The parts of a name split at "-", "_", "." or white space, lower-cased ("DB_PASS": db, pass). */
function nameParts(name: string): string[] {
  return name.toLowerCase().split(/[-_.\s]+/).filter((part) => part !== "");
}

/** The last part of a name, lower-cased ("DB_PASS": "pass"). */
function lastNamePart(name: string): string {
  return nameParts(name).at(-1) ?? "";
}

/** Whether a name's last parts name a password: `MYSQL_PWD`, `smtp-pw`, `DB_PASS`. */
function namesPassword(name: string): boolean {
  const parts = nameParts(name);
  const last = parts.at(-1) ?? "";
  return secret_name_last_parts.has(last) || (last === "pass" && parts.length > 1 && password_owners.has(parts.at(-2)!));
}

function normalizedKeyName(key: string): string {
  return key.toLowerCase().replace(/[-_.\s]/g, "");
}

function isSecretNormalizedName(normalized: string): boolean {
  return (
    secret_key_names.has(normalized) ||
    secret_key_fragments.some((fragment) => normalized.includes(fragment)) ||
    secret_key_endings.some((ending) => normalized.endsWith(ending)) ||
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
 * with each URL password, secret query value, secret written after its name and YAML pair's or
 * HTML tag's value beside a secret's name replaced by "[redacted]" in place (the scheme, host,
 * path, other parameters and the rest of the text are kept), each counted; else unchanged.
 * Replacing them cannot make a credential or card number of what is left: each replaced stretch lies between characters no credential, card group or
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
  return text_decodings.some((decoded) => urlSecretsRedacted(decoded, { redactions: 0 }) !== decoded);
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

/**
 * A text being rebuilt with stretches of it replaced by "[redacted]", each counted in `state`:
 * the text rules' one way of writing what they replace. Stretches are replaced in order.
 */
class Redacting {
  private out = "";
  /** Where the last replaced stretch ends: the text is copied from here on. */
  private copied = 0;
  private replaced = false;

  constructor(
    private readonly text: string,
    private readonly state: ScrubState,
  ) {}

  /** Whether a stretch starting at `start` lies inside one replaced already. */
  replacedPast(start: number): boolean {
    return start < this.copied;
  }

  replace(start: number, end: number): void {
    this.out += `${this.text.slice(this.copied, start)}${redacted}`;
    this.copied = end;
    this.replaced = true;
    this.state.redactions += 1;
  }

  /** The text with the stretches replaced; the text itself when none was. */
  result(): string {
    return this.replaced ? this.out + this.text.slice(this.copied) : this.text;
  }
}

/** Shorter text holds no YAML pair (the shortest: "key:pw\nval:1") and no HTML one. */
const pair_text_chars_min = 12;

/** The text with every URL password, secret query value, secret written after its name and
 *  pair's value beside a secret's name replaced, each counted in `state`. */
function inPlaceSecretsRedacted(text: string, state: ScrubState): string {
  // Names in text before query parameters: a quoted value after "=" is the name rule's to end
  // ("PASSWORD='correct horse'"), where the query rule would end it at the first space.
  // Pairs first: a pair's value is replaced whole, so a URL password or a name in text inside it
  // is not counted again.
  const paired = text.length < pair_text_chars_min ? text : htmlPairsRedacted(yamlPairsRedacted(text, state), state);
  return queryValuesRedacted(labelledSecretsRedacted(urlPasswordsRedacted(paired, state), state), state);
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
  let at = text.indexOf("://");
  if (at === -1) return text;
  const redacting = new Redacting(text, state);
  while (at !== -1) {
    const start = at + 3;
    const end = indexOf(authority_end_pattern, text, start);
    const authority = text.slice(start, end);
    const userinfo_end = authority.lastIndexOf("@");
    const colon = authority.indexOf(":");
    if (colon !== -1 && colon < userinfo_end) {
      const password = authority.slice(colon + 1, userinfo_end);
      if (password !== "" && password !== redacted) redacting.replace(start + colon + 1, start + userinfo_end);
    }
    // The authority's last character may be the ":" of the next "://" ("a://host://u:p@h").
    at = text.indexOf("://", Math.max(start, end - 1));
  }
  return redacting.result();
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
  const redacting = new Redacting(text, state);
  query_name_pattern.lastIndex = 0;
  for (let match = query_name_pattern.exec(text); match !== null; match = query_name_pattern.exec(text)) {
    const value_start = query_name_pattern.lastIndex;
    if (!isSecretQueryName(match[1]!)) continue;
    const value_end = indexOf(query_value_end_pattern, text, value_start);
    const value = text.slice(value_start, value_end);
    // A value replaced already (by the name rule), or a count of a model's tokens (`?max_tokens=4096`), stays.
    const count = normalizedKeyName(match[1]!).endsWith("tokens") && startsWithCount(text, value_start, value_end);
    // Only a name at the text's start can be the name rule's too (after ?, & or # it is this rule's).
    const pair = match.index === 0 && !"?&#".includes(match[0][0]!);
    if (value !== "" && !isRedactedAlready(text, value_start, value_end, pair) && !count) redacting.replace(value_start, value_end);
    query_name_pattern.lastIndex = value_end;
  }
  return redacting.result();
}

/**
 * Names of a secret that are ordinary words too ("Token: reservation for Diwali", "Secret: Clinical
 * Strength deodorant", "Fortune cookie: 3 pieces", "Season pass: $99"): after one of these, or a
 * name ending in "tokens", a value is a secret only when one of its first two words looks like a
 * credential (looksLikeCredential), or, after a PIN's, OTP's or card code's name, its first word
 * is 3 to 8 digits.
 */
const ordinary_word_labels = new Set(["token", "auth", "authorization", "pin", "otp", "cookie", "cookies", "credential", "credentials", "pass", "secret", "secrets", "cvv", "cvc", "csc", "cvn", "cvn2", "cvd", "cav2"]);
const numeric_secret_labels = new Set(["pin", "otp", "cvv", "cvc", "csc", "cvn", "cvn2", "cvd", "cav2"]);
/** Words that make an ordinary word before them a credential's name: "Client secret", "Access
 *  token", "Auth token", "Session cookie", "UPI PIN". */
const credential_qualifiers = new Set(["client", "app", "api", "shared", "webhook", "signing", "consumer", "access", "refresh", "auth", "bearer", "session", "id", "csrf", "private", "personal", "upi", "card", "atm", "debit", "login", "admin", "root", "user", "db", "database", "smtp", "ftp", "key", "razorpay", "stripe"]);
/** The ordinary words a qualifier makes a credential's name ("Card PIN", but not "Card authorization: declined"). */
const qualified_words = new Set(["secret", "token", "key", "pin", "otp", "pass", "cookie"]);
/** The second word of a two-word name that makes it a secret's when the first word alone already is
 *  one ("Secret key", "PIN number"); "Secret Santa" and "Password manager" are not. */
const credential_nouns = new Set(["key", "token", "secret", "id", "code", "phrase", "number", "value"]);
/** Words between a name and its ":" that say nothing ("Your password is: …"). */
const label_fillers = new Set(["is", "are", "was", "were"]);
const label_chars_max = 64;
/** Spaces, tabs and no-break spaces (French typography puts one before a colon) around a name's separator, at most. */
const label_spaces_max = 32;
/** Quotes and markup between a name and its separator (`**Password**:`, "`password`:", `['password'] =`), at most. */
const label_closers_max = 4;
/** A parenthesis between a name and its separator ("Password (case sensitive):"), at most this long. */
const label_aside_chars_max = 80;
/** Every name judged secret contains one of these (case aside): only a separator shortly after
 *  one (label_span_max) can follow such a name. */
const label_keyword_pattern = /pass|pw|secret|token|key|auth|cookie|cv[vcnd]|csc|cav2|code|credential|session|pin|otp|verification/gi;
/** From the end of a keyword in a name to its separator, at most: three names and what may stand between them and it. */
const label_span_max = 3 * (label_chars_max + 2) + label_spaces_max + label_closers_max + label_aside_chars_max;
/** A name's separator: ":", "=" or a full-width colon ("=>", "==", "===" and ":=" are read
 *  whole), or the "|" that closes a Markdown table's cell holding the name (startsCell). */
const label_separator_pattern = /[:=\uff1a|]/g;
/** A value that says there is none ("Password: not required", "api_key: null", "<your key>"), or
 *  a schema's type or flag ("| password | string | yes |"): no secret. */
const placeholder_pattern =
  /^(?:\(?(?:none|null|nil|n\/a|empty|unset|missing|hidden|redacted|not (?:set|required|configured|provided|needed|available))\)?|\*+|•+|x{3,}|-+|<[a-z _-]+>|\[[a-z _-]+\]|yes|no|true|false|optional|required|string|integer|int|number|boolean|bool|object|array|[✓✔✗✘])\.?$/i;
const placeholder_chars_max = 24;
const line_end_pattern = /[\r\n]/g;
/** Where a value ends after "=" (an environment line, a form or cookie pair) or after a quoted name
 *  (JSON or a dict written in text): white space, or what ends a pair or member. */
const assigned_value_end_pattern = /[\s&;,"'<>]/g;
const member_value_end_pattern = /[\s,}\]]/g;
/** What may follow a quoted value that ends it there: anything else means the quote was part of it ("'don't-tell'"). */
const after_quoted_value = /^(?:[\s,;:}\])>&]|$)/;
/** What a line may hold after a name whose value is on the lines below (YAML): nothing, a tag
 *  ("!!str") or anchor ("&creds"), a block scalar's indicator ("|", ">-"), a comment ("# rotated monthly"). */
const yaml_value_below = /^(?:[!&]\S*\s*){0,2}(?:[|>][-+]?[1-9]?[-+]?)?\s*(?:#.*)?$/;
/** A longer rest of the line is a value of its own (and not read again for every name on a long line). */
const yaml_rest_chars_max = 120;
const cell_end_pattern = /[|\r\n]/g;

function isLabelSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0xa0 || code === 0x202f;
}

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

/** Skips label spaces leftwards from `at` (exclusive), at most `most`. */
function spacesBefore(text: string, at: number, most = label_spaces_max): number {
  let start = at;
  while (start > 0 && at - start < most && isLabelSpace(text.charCodeAt(start - 1))) start -= 1;
  return start;
}

/**
 * Whether a name in text is a secret's: as a key's name (isSecretKeyName), but only where it ends
 * in the secret's word (`api_key`, `DB_PASSWORD`, `X-Auth-Key`), a trailing "s" aside, so that
 * `password_reset`, `tokenizer`, `cookie_policy` and `cvc_check` are not; and a PIN's or OTP's
 * name only as its own part (`UPI PIN`, `card_pin`), so that `Spin` and `Chopin` are not.
 */
function isSecretLabelName(name: string): boolean {
  return remembered(label_verdicts, name, judgeLabelName);
}

function judgeLabelName(name: string): boolean {
  const normalized = normalizedKeyName(name);
  const ending = normalized.endsWith("s") ? normalized.slice(0, -1) : normalized;
  if (secret_key_names.has(normalized) || secret_key_names.has(ending) || namesPassword(name)) return true;
  return endsInSecretWord(normalized, lastNamePart(name)) || secret_word_endings.some((fragment) => ending.endsWith(fragment));
}

interface Label {
  /** The name, normalized (normalizedKeyName). */
  name: string;
  /** Whether one of ordinary_word_labels, or a name ending in "tokens", before a ":" and not
   *  quoted: its value must look like a credential. */
  ordinary: boolean;
  /** Written in quotes ("api_key", 'pin'), as JSON or a dict printed in text writes a key. */
  quoted: boolean;
  /** Where the name starts. */
  start: number;
}

/** One word of a name, ending at `end`, and where it starts; undefined when none ends there. */
function wordBefore(text: string, end: number): { start: number; word: string } | undefined {
  const start = labelStart(text, end);
  return start === -1 ? undefined : { start, word: text.slice(start, end) };
}

/**
 * The name written before the separator at `separator` when it is a secret's, or undefined: one
 * word ("password", "X-Api-Key"), or two ("API key", "Session ID", "Client secret"), perhaps in
 * quotes or markup ('"api_key"', "`password`", "**Password**", "['password']"), perhaps followed
 * by a parenthesis ("Password (case sensitive)") or by "is" ("Your password is").
 */
function secretLabel(text: string, separator: number): Label | undefined {
  let end = asideBefore(text, spacesBefore(text, separator));
  if (end === -1) return undefined;
  let quote = "";
  for (let closers = 0; closers < label_closers_max && "*`'\"]".includes(text[end - 1] ?? "x"); closers++) {
    if (quote === "" && (text[end - 1] === '"' || text[end - 1] === "'" || text[end - 1] === "`")) quote = text[end - 1]!;
    end -= 1;
    if (text[end - 1] === "\\") end -= 1; // JSON inside a JSON string: \"password\":
  }
  let last = wordBefore(text, end);
  if (last === undefined) return undefined;
  if (label_fillers.has(last.word.toLowerCase())) {
    // "Your password is:", "Password (temp) is:".
    const before_filler = asideBefore(text, spacesBefore(text, last.start, 3));
    const named = before_filler === -1 || before_filler === last.start ? undefined : wordBefore(text, before_filler);
    if (named === undefined) return undefined;
    last = named;
  }
  const first_end = spacesBefore(text, last.start, 3);
  const first = first_end === last.start ? undefined : wordBefore(text, first_end);
  const label = labelOf(first?.word, last.word);
  if (label === undefined) return undefined;
  const start = label.whole && first !== undefined ? first.start : last.start;
  const quoted = quote !== "" && (text[start - 1] === quote || (text[start - 1] === "\\" && text[start - 2] === quote));
  // A table's cell holds the name alone: "| password | hunter2 |".
  if (text[separator] === "|" && !startsCell(text, start)) return undefined;
  // A quoted name or one assigned with "=" is a key, and judged as one: whatever its value.
  return { name: label.name, ordinary: label.ordinary && !quoted && text[separator] !== "=", quoted, start };
}

/** Where the text before a parenthesis that ends at `end` ends ("Password (case sensitive)"), looked
 *  for back to label_aside_chars_max on its line; `end` when no parenthesis ends there, -1 when
 *  none opens close enough. */
function asideBefore(text: string, end: number): number {
  if (text[end - 1] !== ")") return end;
  for (let at = end - 2; at >= 0 && end - at <= label_aside_chars_max; at--) {
    const char = text[at];
    if (char === "(") return spacesBefore(text, at);
    if (char === "\n" || char === "\r") return -1;
  }
  return -1;
}

/** Whether a Markdown table's cell starts shortly before `start`, with nothing but words, spaces,
 *  quotes, markup and a parenthesis between ("| password |", "| Admin password |", "| `pin` |"). */
function startsCell(text: string, start: number): boolean {
  let at = start;
  while (at > 0 && start - at < label_aside_chars_max && /[\w .*`'"()-]/.test(text[at - 1]!)) at -= 1;
  return text[at - 1] === "|";
}

/** The name two words make ("API key", "Client secret"), or the last alone, when a secret's. */
function labelOf(first: string | undefined, last: string): { name: string; ordinary: boolean; whole: boolean } | undefined {
  if (first !== undefined && isSecretLabelName(`${first} ${last}`)) {
    const first_name = normalizedKeyName(first);
    const last_name = normalizedKeyName(last);
    const qualified = isSecretLabelName(last)
      ? qualified_words.has(last_name) && credential_qualifiers.has(first_name)
      : !isSecretLabelName(first) || credential_nouns.has(last_name);
    if (qualified) return { name: `${first_name}${last_name}`, ordinary: false, whole: true };
  }
  if (!isSecretLabelName(last)) return undefined;
  const name = normalizedKeyName(last);
  return { name, ordinary: ordinary_word_labels.has(name) || name.endsWith("tokens"), whole: false };
}

/** The first index at or after `from` that `pattern` (global) matches, or the text's length. */
function indexOf(pattern: RegExp, text: string, from: number): number {
  pattern.lastIndex = from;
  return pattern.exec(text)?.index ?? text.length;
}

/** indexOf, reading no further than `limit` (returned when nothing matches before it). */
function indexWithin(pattern: RegExp, text: string, from: number, limit: number): number {
  if (limit >= text.length) return indexOf(pattern, text, from);
  pattern.lastIndex = 0;
  const found = pattern.exec(text.slice(from, limit));
  return found === null ? limit : from + found.index;
}

/**
 * Where a text's lines end, and where their text ends before trailing white space, each found once
 * however many values on a line ask: a 1 MiB line of "Token: word Token: word …" would otherwise
 * be scanned to its end once for every name on it.
 */
class LineEnds {
  /** No line break lies between these two: any position from `from` to `line_end` has that line end. */
  private from = 0;
  private line_end = -1;
  private text_end = -1;

  constructor(private readonly text: string) {}

  /** The end of the line `at` is on (a "\r" or "\n", or the text's end). */
  lineEnd(at: number): number {
    if (at < this.from || at > this.line_end) {
      this.from = at;
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

/** Where a list or object that opens at `from` closes (after its matching bracket), or `limit`. */
function bracketedEnd(text: string, from: number, limit: number): number {
  const open = text[from]!;
  const close = open === "[" ? "]" : "}";
  let depth = 0;
  for (let at = from; at < limit; at++) {
    if (text[at] === open) depth += 1;
    else if (text[at] === close && --depth === 0) return at + 1;
  }
  return limit;
}

/** Where the block below the line that ends at `line_end` ends (blockBelow): the lines indented
 *  deeper than the name's, and a list's items at its indentation, blank lines among them. */
function indentedBlockEnd(text: string, line_end: number, block: YamlBlock): number {
  const { indent, list } = block;
  let end = line_end;
  for (let at = line_end; at < text.length; ) {
    const line = lineAfter(text, at);
    at = line.end;
    // A blank line or a comment: the block may go on below it.
    if (line.text_start === line.end || (text[line.text_start] === "#" && line.indent <= indent)) continue;
    if (line.indent < indent || (line.indent === indent && !(list && text.startsWith("- ", line.text_start)))) break;
    end = line.end;
  }
  return end;
}

/** The line after the one that ends at `line_end`: where its text starts, past its indentation,
 *  how deep that is, and where it ends. */
function lineAfter(text: string, line_end: number): { text_start: number; indent: number; end: number } {
  const start = line_end + (text.startsWith("\r\n", line_end) ? 2 : 1);
  const indent = indentAt(text, start);
  return { text_start: start + indent, indent, end: indexOf(line_end_pattern, text, start) };
}

/** The spaces and tabs a line that starts at `line_start` is indented by. */
function indentAt(text: string, line_start: number): number {
  let spaces = 0;
  while (text[line_start + spaces] === " " || text[line_start + spaces] === "\t") spaces += 1;
  return spaces;
}

/** A value on the lines below a name (YAML): where it starts, the name's indentation, and whether it is a list at that indentation. */
interface YamlBlock {
  start: number;
  indent: number;
  list: boolean;
}

/** How far the line holding `at` is indented. */
function indentOf(text: string, at: number): number {
  // Back to the line's start, char by char: lastIndexOf("\r") would read the whole text back for a line break it holds none of.
  let line_start = at;
  while (line_start > 0 && text[line_start - 1] !== "\n" && text[line_start - 1] !== "\r") line_start -= 1;
  return indentAt(text, line_start);
}

/** Blank and comment lines looked past for a value on the lines below its name, at most. */
const lines_skipped_max = 8;

/** How much of a value is read to judge it: past this, it is no placeholder and no count. */
const value_probe_chars = 128;

/** Skips spaces and tabs rightwards from `at`. */
function spacesAfter(text: string, at: number): number {
  let end = at;
  while (isLabelSpace(text.charCodeAt(end))) end += 1;
  return end;
}

/** Where the value after a name starts and ends (see labelledSecretsRedacted), reading no more than `read_chars` of it. */
function labelledValue(text: string, separator: number, label: Label, lines: LineEnds, read_chars: number, blocks: BlocksBelow): { start: number; end: number; below?: YamlBlock } {
  let after = separator + 1;
  while (text[after] === "=" || text[after] === ">") after += 1; // "=>", "==", "===", ":="
  let start = spacesAfter(text, after);
  if (text[start] === "*") {
    // The end of the name's markup: "**Password:** hunter2".
    while (text[start] === "*") start += 1;
    start = spacesAfter(text, start);
  }
  const limit = Math.min(text.length, start + read_chars);
  const assigned = text[separator] === "=";
  /** Where the value goes on to when it is not quoted, or its quote was part of it. */
  const plainEnd = (from: number) =>
    label.quoted ? indexWithin(member_value_end_pattern, text, from, limit) : assigned ? indexWithin(assigned_value_end_pattern, text, from, limit) : Math.min(limit, lines.textEnd(from));
  const escaped = text[start] === "\\" && text[start + 1] === '"';
  const quote = escaped ? '"' : text[start];
  if (quote === '"' || quote === "'" || quote === "`") {
    const opened = start + (escaped ? 2 : 1);
    const line_end = Math.min(limit, lines.lineEnd(opened));
    const end = escaped ? escapedStringEnd(text, opened, line_end) : quotedEnd(text, opened, line_end, quote);
    const close_end = end + (escaped ? 2 : 1);
    if (end === line_end || after_quoted_value.test(text.slice(close_end, close_end + 1))) return { start: opened, end };
    return { start: opened, end: Math.max(end, plainEnd(close_end)) };
  }
  // A list or object after a quoted name or "=", to its close. (After ":" the value runs to the
  // line's end, which holds it, and a password that starts with a bracket too: "[2024]Summer!".)
  if ((label.quoted || assigned) && (text[start] === "[" || text[start] === "{")) {
    const close_end = bracketedEnd(text, start, Math.min(limit, lines.lineEnd(start)));
    // A value that only starts with a bracket ("=[2024]Summer!") goes on.
    return { start, end: after_quoted_value.test(text.slice(close_end, close_end + 1)) ? close_end : Math.max(close_end, plainEnd(close_end)) };
  }
  if (text[separator] === "|") {
    // A table's next cell.
    let end = Math.min(lines.lineEnd(start), indexWithin(cell_end_pattern, text, start, limit));
    while (end > start && isLabelSpace(text.charCodeAt(end - 1))) end -= 1;
    return { start, end };
  }
  const end = plainEnd(start);
  if (assigned || label.quoted || end - start > yaml_rest_chars_max || !yaml_value_below.test(text.slice(start, end))) return { start, end };
  // "password:" with its value on the lines below (YAML): indented deeper, or a list's items at
  // the name's own indentation; what the line holds (a block indicator, a tag, a comment) stays.
  const line_end = lines.lineEnd(start);
  const block = blocks.below(text, line_end, separator);
  return block === undefined ? { start, end } : { start: block.start, end: line_end, below: block };
}

/**
 * The block below a line (blockBelow), found once for all the names on that line: each of many
 * names with nothing after them on one long line ("#otp:#otp:#otp:…") would otherwise walk back
 * to the line's start for its indentation and read the lines below again.
 */
class BlocksBelow {
  private line_end = -1;
  private block: YamlBlock | undefined;

  below(text: string, line_end: number, at: number): YamlBlock | undefined {
    if (line_end !== this.line_end) {
      this.line_end = line_end;
      this.block = blockBelow(text, line_end, indentOf(text, at));
    }
    return this.block;
  }
}

/** The first line of the block below the line that ends at `line_end`, up to lines_skipped_max blank
 *  and comment lines aside, when it is indented deeper than `indent` or is a list's item at that
 *  indentation ("- hunter2"). The bound keeps the search linear: each of many commented-out
 *  names ("#password:") would otherwise read all the comment lines below it. */
function blockBelow(text: string, line_end: number, indent: number): YamlBlock | undefined {
  for (let at = line_end, skipped = 0; at < text.length && skipped <= lines_skipped_max; skipped++) {
    const line = lineAfter(text, at);
    at = line.end;
    // A blank line or a comment: the block may start below it.
    if (line.text_start === line.end || text[line.text_start] === "#") continue;
    if (line.indent > indent) return { start: line.text_start, indent, list: false };
    // A list's items are replaced after the first one's "- ", which says again, when read again, that the value is below.
    return line.indent === indent && text.startsWith("- ", line.text_start) ? { start: line.text_start + 2, indent, list: true } : undefined;
  }
  return undefined;
}

/** Whether text[start, end) is a replacement this scrubbing made: "[redacted]" alone or quoted
 *  ("password='[redacted]'"); with `pair_end`, also before a "," or ";" that ends the name rule's
 *  pair ("password=[redacted],user=bob", as the query rule meets it). "[redacted]hunter2" and
 *  "[redacted] hunter2" are values of their own. */
function isRedactedAlready(text: string, start: number, end: number, pair_end = false): boolean {
  const quote = `'"\``.includes(text[start] ?? "x") ? text[start]! : "";
  const after = start + quote.length + redacted.length;
  if (!text.startsWith(redacted, start + quote.length)) return false;
  // Quoted, or after an opening quote alone: the name rule's replacement of a value whose quote was part of it.
  if (quote !== "") return after === end || (text[after] === quote && after + 1 === end);
  return after === end || (pair_end && (text[after] === "," || text[after] === ";"));
}

/** Whether a word looks like a credential: 16 characters or more, or 6 or more holding a digit,
 *  one of `._~+/=` or a lower-case letter followed by a capital. */
function looksLikeCredential(word: string): boolean {
  return word.length >= credential_chars_min || (word.length >= 6 && ordinary_value_mark.test(word));
}

/** credential_mark without "-": a hyphen joins words ("oatmeal-raisin", "session-token") as often as a token's parts. */
const ordinary_value_mark = /[0-9._~+/=]|[a-z][A-Z]/;

/**
 * Whether the value written after a secret's name is the secret: any value, but after an ordinary
 * word (Label.ordinary) only one whose first or second word looks like a credential, or, after a
 * PIN's, OTP's or card code's name, whose first word is 3 to 8 digits; a count of a model's
 * tokens ("max_tokens: 4096") never. Reads no more than the value's first words: many names on
 * one long line each have a value to the line's end.
 */
function isLabelledSecret(label: Label, text: string, start: number, end: number, below = false): boolean {
  if (start >= end || isRedactedAlready(text, start, end)) return false;
  if (label.name.endsWith("tokens") && startsWithCount(text, start, end)) return false;
  // A block below is judged by its first line, which does not say the lines after it hold nothing.
  if (!below && end - start <= placeholder_chars_max && placeholder_pattern.test(text.slice(start, end).trim())) return false;
  if (!label.ordinary) return true;
  const words = text.slice(start, Math.min(end, start + 2 * credential_chars_min + 1)).split(/\s+/, 2);
  if (numeric_secret_labels.has(label.name) && /^\d{3,8}$/.test(words[0]!)) return true;
  return words.some(looksLikeCredential);
}

/** True when the first word of text[start, end) is a count: digits, grouped by "," or "_" ("4096",
 *  "1,200"), perhaps with "~" before, a "k" or "M" after, and a "," or "." ending it. */
function startsWithCount(text: string, start: number, end: number): boolean {
  const word_end = Math.min(end, start + 32);
  const word = text.slice(start, word_end).split(/\s/, 1)[0]!;
  return /^~?\d[\d,_]*(?:\.\d+)?[kKmM]?[.,;]?$/.test(word);
}

/**
 * Each secret written after its name in text replaced in place: "password: hunter2",
 * "X-Api-Key: 3f9a…", "Cookie: sid=…", "DB_PASSWORD=hunter2", '"client_secret": "…"',
 * "'password' => 'hunter2'". A value runs: quoted, to its closing quote (on, when the quote was
 * part of it); a list or object, to its closing bracket; after a quoted name, to the member's
 * end; after "=", to the pair's end; after ":", to the line's end, or over the indented lines
 * below when the line holds none (YAML). Each separator is looked at once, with a bounded look
 * back, and only shortly after a keyword a secret's name holds; the search goes on after a
 * replaced value, and a kept value is read no further than its first words: linear in the text.
 */
function labelledSecretsRedacted(text: string, state: ScrubState): string {
  if (!text.includes(":") && !text.includes("=") && !text.includes("|") && !text.includes("\uff1a")) return text;
  label_keyword_pattern.lastIndex = 0;
  let keyword = label_keyword_pattern.exec(text);
  if (keyword === null) return text;
  let keyword_end = -1; // where the last keyword before the separator ends
  const lines = new LineEnds(text);
  const blocks = new BlocksBelow();
  const redacting = new Redacting(text, state);
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
    if (label.start >= 3 && text.startsWith("://", label.start - 3)) continue; // a URL's user ("https://token:…@host"): its password is the URL rule's
    // A query's parameter is queryValuesRedacted's, but for a quoted value, which the name rule ends.
    if (text[separator] === "=" && label.start > 0 && "?&#".includes(text[label.start - 1]!) && !/['"`]/.test(text[spacesAfter(text, separator + 1)] ?? "")) continue;
    // Judged on its first characters; read to its end only when replaced (and the search goes on
    // after it): a kept value read to its end would be read again for every name before that end.
    const probe = labelledValue(text, separator, label, lines, value_probe_chars, blocks);
    // (The first line below is read apart from `lines`, which stays on the names' line.)
    const judged_end = probe.below ? indexWithin(line_end_pattern, text, probe.start, Math.min(text.length, probe.start + value_probe_chars)) : probe.end;
    if (!isLabelledSecret(label, text, probe.start, judged_end, probe.below !== undefined)) continue;
    const value = labelledValue(text, separator, label, lines, Number.POSITIVE_INFINITY, blocks);
    if (value.below) value.end = indentedBlockEnd(text, value.end, value.below);
    redacting.replace(value.start, value.end);
    label_separator_pattern.lastIndex = value.end;
  }
  return redacting.result();
}

/** A YAML line naming a pair (`- name: DB_PASSWORD`, `key: API_TOKEN`): its indentation, a list
 *  item's dash, and what follows the member's ":". The members are pair_name_keys'. */
const yaml_pair_name_line =
  /^([ \t]*)(-[ \t]+)?(?:name|key|type|label|field|field[-_]?name|variable|var[-_]?name|header|header[-_]?name|element|selector|parameter[-_]?key|parameter[-_]?name|option[-_]?name|output[-_]?key)[ \t]*:([^\r\n]*)/gim;
/** The member beside it holding the pair's value, at the mapping's indentation: pair_value_keys'
 *  but `text`, which in YAML holds a form's prose ("text: Enter your password here") far more
 *  often than a secret. */
const yaml_pair_value_member = /^(?:value|val|parameter[-_]?value|option[-_]?value|output[-_]?value)[ \t]*:/i;
/** Lines read below a pair's name for its value, at most (the mapping's other members, what is
 *  nested under them, blank and comment lines): the bound keeps the search linear. */
const yaml_pair_lines_max = 16;
/** A block indicator, a comment, both or nothing: no value on the line. */
const yaml_indicator_only = /^(?:[|>][-+]?[1-9]?[-+]?)?\s*(?:#.*)?$/;
/** A YAML document's start or end: no mapping goes on past it. */
const yaml_document_marker = /^(?:---|\.\.\.)(?:\s|$)/;

/** A YAML scalar as written after a ":": unquoted, its comment left out. */
function yamlScalar(written: string): string {
  const text = written.trim();
  const quote = text[0];
  if ((quote === '"' || quote === "'") && text.length > 1 && text.endsWith(quote)) return text.slice(1, -1);
  const comment = text.search(/\s#/);
  return comment === -1 ? text : text.slice(0, comment).trimEnd();
}

/** Where a YAML pair's value is written; `spans_lines` when it goes on below its member's line
 *  (a block, a quoted or plain value continued), so names inside it are not read. */
interface YamlPairValue {
  start: number;
  end: number;
  spans_lines: boolean;
}

/**
 * Where the value of the pair whose name's line ends at `line_end` is written: the value member
 * at the mapping's indentation `indent`, within yaml_pair_lines_max lines; or undefined when the
 * mapping or the document ends first, or the value is empty.
 */
function yamlPairValue(text: string, line_end: number, indent: number): YamlPairValue | undefined {
  for (let at = line_end, read = 0; at < text.length && read < yaml_pair_lines_max; read++) {
    const line = lineAfter(text, at);
    at = line.end;
    if (line.text_start === line.end || text[line.text_start] === "#") continue; // blank, or a comment
    if (line.indent < indent || (line.indent === 0 && yaml_document_marker.test(text.slice(line.text_start, line.text_start + 4)))) return undefined;
    // Nested under another member, or that member's list ("ports:\n- 80" at the same indentation).
    if (line.indent > indent || text[line.text_start] === "-") continue;
    const member = yaml_pair_value_member.exec(text.slice(line.text_start, Math.min(line.end, line.text_start + 32)));
    if (member !== null) return yamlValueAfter(text, spacesAfter(text, line.text_start + member[0].length), line.end, indent);
  }
  return undefined;
}

/** A YAML null: no value to replace. */
const yaml_null = /^(?:~|null|Null|NULL)$/;

/**
 * The value written from `start`, on a member's line that ends at `line_end`, in a mapping at
 * `indent`: quoted, inside its quotes (a " #" inside it and a comment after it are the quote's
 * business), over the lines it goes on over; a block below, after nothing but a block indicator,
 * an anchor, a tag or a comment (`|`, `>- # folded`, `&tok |`, `!!binary |`); else plain, up to
 * its comment, or, with none, over the lines below indented deeper. Empty or null: undefined.
 */
function yamlValueAfter(text: string, start: number, line_end: number, indent: number): YamlPairValue | undefined {
  const quote = text[start];
  if (quote === '"' || quote === "'") {
    const end = yamlQuotedEnd(text, start + 1, line_end, indent, quote);
    return end === start + 1 ? undefined : { start: start + 1, end, spans_lines: end > line_end };
  }
  let end = line_end;
  while (end > start && /\s/.test(text[end - 1]!)) end -= 1;
  const written = text.slice(start, end);
  const comment = written.search(/(?:^|\s)#/);
  const head = comment === -1 ? written : written.slice(0, comment).trimEnd();
  // Nothing but a block indicator, anchor, tag or comment: the value is the block below. With no
  // block, an anchor or tag is read as the value ("!hunter2" is one in text that is not YAML).
  if (head.length <= yaml_rest_chars_max && yaml_value_below.test(head)) {
    const block = yamlBlockBelow(text, line_end, indent, true);
    if (block !== undefined || yaml_indicator_only.test(head)) return block;
  }
  if (head === "" || yaml_null.test(head)) return undefined;
  if (comment !== -1) return { start, end: start + head.length, spans_lines: false };
  // A plain value goes on over the lines below indented deeper.
  const continued = yamlBlockBelow(text, line_end, indent, false);
  return continued === undefined ? { start, end, spans_lines: false } : { start, end: continued.end, spans_lines: true };
}

/** The block below a member's line that ends at `line_end`: lines indented deeper than
 *  `indent`, or, with `lists`, a list's items at that indentation ("value:\n- hunter2"). */
function yamlBlockBelow(text: string, line_end: number, indent: number, lists: boolean): YamlPairValue | undefined {
  const below = blockBelow(text, line_end, indent);
  if (below === undefined || (below.list && !lists)) return undefined;
  return { start: below.start, end: indentedBlockEnd(text, line_end, below), spans_lines: true };
}

/**
 * Where a YAML value quoted with `quote`, opened before `from` on a line that ends at `line_end`,
 * ends: at its closing quote (`\` escapes a character in double quotes, a doubled quote is one
 * in single quotes), on its line or a line below it indented deeper than the mapping (`indent`);
 * left open, at the end of its last such line, never past a line of the mapping's own.
 */
function yamlQuotedEnd(text: string, from: number, line_end: number, indent: number, quote: string): number {
  let value_end = line_end;
  for (let at = from, end = line_end; ; ) {
    const close = quote === "'" ? singleQuotedEnd(text, at, end) : quotedEnd(text, at, end, quote);
    if (close < end) return close;
    if (at < end) value_end = end;
    if (end >= text.length) return value_end;
    const line = lineAfter(text, end);
    if (line.text_start !== line.end && line.indent <= indent) return value_end;
    at = line.text_start;
    end = line.end;
  }
}

/** Where a YAML single-quoted value ends, looked for from `from` up to `limit`: at its closing
 *  quote, a doubled quote ('it''s') being one quote of the value; else `limit`. */
function singleQuotedEnd(text: string, from: number, limit: number): number {
  for (let at = from; at < limit; at++) {
    if (text[at] !== "'") continue;
    if (text[at + 1] !== "'") return at;
    at += 1;
  }
  return limit;
}

/**
 * Each value of a YAML name/value pair whose name is a secret's replaced in place, as in data
 * (pair_name_keys): a Kubernetes env entry written as text ("- name: DB_PASSWORD\n  value:
 * hunter2"), a CloudFormation parameter ("ParameterKey: DbPassword\n  ParameterValue: …").
 * Each name's line reads at most yaml_pair_lines_max lines below it, and a name inside a value
 * found over several lines is not read at all, so no line is read more than a bounded number of
 * times: linear in the text.
 */
function yamlPairsRedacted(text: string, state: ScrubState): string {
  if (!text.includes("\n") && !text.includes("\r")) return text;
  const found: YamlPairValue[] = [];
  /** Values found over several lines: a name inside one is not read (its value would lie inside too). */
  let blocks: YamlPairValue[] = [];
  yaml_pair_name_line.lastIndex = 0;
  for (let match = yaml_pair_name_line.exec(text); match !== null; match = yaml_pair_name_line.exec(text)) {
    const at = match.index;
    blocks = blocks.filter((block) => block.end > at);
    if (blocks.some((block) => block.start <= at)) continue;
    const name = yamlScalar(match[3]!);
    if (name === "" || !namesPairSecret(name)) continue;
    const value = yamlPairValue(text, at + match[0].length, match[1]!.length + (match[2]?.length ?? 0));
    if (value === undefined) continue;
    // Names inside a value over several lines are not read again, whether or not it is replaced.
    if (value.spans_lines) blocks.push(value);
    if (!isRedactedAlready(text, value.start, value.end)) found.push(value);
  }
  found.sort((a, b) => a.start - b.start);
  const redacting = new Redacting(text, state);
  // A value inside one replaced already goes with it.
  for (const { start, end } of found) if (!redacting.replacedPast(start)) redacting.replace(start, end);
  return redacting.result();
}

/** An HTML tag, to its ">": each is read from its "<" to the next "<" or ">" at most, so the tags
 *  of a text are read once however many "<" it holds. */
const html_tag_pattern = /<[A-Za-z][^<>]*>/g;
/** A tag's attribute, with its value, quoted or not, when it has one. Each match takes a whole
 *  word, with or without a value, so no word is read again from each of its characters (which
 *  took 19 s for a 128 KiB word that no "=" followed). An unquoted value runs to white space or
 *  the tag's end, as a browser reads it (`href=/cb?state=…`, `value=hun"ter2`); one in braces
 *  (JSX's `value={…}`) is not HTML's. */
const html_attribute_pattern = /([^\s"'<>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'<>{][^\s<>]*))?/g;
/** The attributes that name what a tag's value is: a form field's name, id, type, autocomplete
 *  hint and label, a meta tag's name. */
const html_name_attributes = new Set(["name", "id", "type", "autocomplete", "aria-label", "property"]);
/** The attributes holding the value: an input's, a meta tag's. */
const html_value_attributes = new Set(["value", "content"]);
const html_value_prefilter = /(?:value|content)\s*=/i;

/**
 * Each value an HTML tag holds beside a secret's name replaced in place: a form's hidden
 * `<input type="hidden" name="authenticity_token" value="…">`, a prefilled
 * `<input type="password" value="…">`, `<meta name="csrf-token" content="…">`. The rest of the
 * tag and of the page is kept.
 */
function htmlPairsRedacted(text: string, state: ScrubState): string {
  if (!text.includes("<") || !html_value_prefilter.test(text)) return text;
  const redacting = new Redacting(text, state);
  html_tag_pattern.lastIndex = 0;
  for (let tag = html_tag_pattern.exec(text); tag !== null; tag = html_tag_pattern.exec(text)) {
    const values: { start: number; end: number }[] = [];
    let names_secret = false;
    html_attribute_pattern.lastIndex = 0;
    for (let attribute = html_attribute_pattern.exec(tag[0]); attribute !== null; attribute = html_attribute_pattern.exec(tag[0])) {
      const name = attribute[1]!.toLowerCase();
      const written = attribute[2];
      if (written === undefined) continue;
      const quoted = written[0] === '"' || written[0] === "'";
      const value = quoted ? written.slice(1, -1) : written;
      if (html_name_attributes.has(name)) names_secret ||= namesPairSecret(value);
      else if (html_value_attributes.has(name) && value !== "") {
        const start = tag.index + attribute.index + attribute[0].length - written.length + (quoted ? 1 : 0);
        values.push({ start, end: start + value.length });
      }
    }
    if (!names_secret) continue;
    for (const { start, end } of values) if (!isRedactedAlready(text, start, end)) redacting.replace(start, end);
  }
  return redacting.result();
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
  const pair_secret = keysVerdict(value as Record<string, unknown>, keys);
  if (pair_secret === replaced_whole) return redact(state);
  const copy: Record<string, unknown> = {};
  for (const key of keys) {
    const item = (value as Record<string, unknown>)[key];
    const scrubbed = redactedIn(key, item, pair_secret) ? redact(state) : scrubValue(item, depth + 1, state);
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
  const pair_secret = keysVerdict(object, keys);
  if (pair_secret === replaced_whole) return redactedText(state);
  sortKeys(keys);
  let out = "{";
  let first = true;
  for (const key of keys) {
    const item = object[key];
    const text = redactedIn(key, item, pair_secret) ? redactedText(state) : scrubbedText(item, depth + 1, state);
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
