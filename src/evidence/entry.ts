// One evidence log entry: its fields, the kinds writers may use, and the canonical bytes
// and RFC 6962 leaf hash that the tree, the receipts and the export all agree on.

import { jsonPreview } from "../json-text.js";
import { canonicalJson, isHexSha256, sha256Hex } from "./canonical.js";
import { leafHash } from "./merkle.js";
import { scrub, scrubbedCanonicalJson } from "./scrub.js";

export const entry_version = 1;
/** Writers' kinds; `system.*` kinds are the log's own lifecycle (genesis, start, evidence_gap, observer_lost, observer_resumed). */
export const entry_kinds = ["gate.decision", "gate.settlement", "gate.operator", "ingest.decision", "observer.call"] as const;
const system_kind_pattern = /^system\.[a-z][a-z0-9_]{0,62}$/;
export const source_chars_max = 200;
/** An ingest delivery is at most 2 MiB; one entry rarely needs more than twice that, but RFC 8785
 *  can write a record longer than it was sent (9e20 as 21 digits), so ingest checks each entry. */
export const entry_bytes_max = 4_194_304;

/** The logged object. Its RFC 8785 bytes are the Merkle leaf; `seq` is its 0-based leaf index. */
export interface Entry {
  v: 1;
  seq: number;
  kind: string;
  source: string;
  received_at: string;
  occurred_at?: string;
  /** Hex SHA-256 of the body's canonical JSON as stored (scrubbed), or of the bytes as received (ingest). */
  body_sha256: string;
  /** The body with secrets scrubbed. */
  body: Record<string, unknown>;
}

export interface AppendInput {
  kind: string;
  /** Who wrote it: "gate", "webhook:razorpay", an evidence source id, "system"… */
  source: string;
  body: Record<string, unknown>;
  /** RFC 3339 time the event happened, when the writer knows it (ingest records). */
  occurred_at?: string;
  /** Hex SHA-256 the writer computed over the raw bytes; default: of the body's canonical JSON as stored (scrubbed). */
  body_sha256?: string;
}

/** A writer passed something the log cannot record: a bug in the caller, never silently fixed. */
export class EvidenceInputError extends Error {
  override name = "EvidenceInputError";
}

/** An entry over entry_bytes_max. From a writer that passes outside input (ingest), the
 *  sender's problem to be told about, which is why it has its own class. */
export class EntryTooLargeError extends EvidenceInputError {
  override name = "EntryTooLargeError";
  constructor(
    readonly seq: number,
    readonly bytes: number,
  ) {
    super(`entry exceeds ${entry_bytes_max} bytes`);
  }
}

export function isEntryKind(kind: string): boolean {
  return (entry_kinds as readonly string[]).includes(kind) || system_kind_pattern.test(kind);
}

/** Proleptic Gregorian, as RFC 3339 and Date.parse count (year 0000 is a leap year). */
function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

const rfc3339_fraction_digits_max = 9;

/** The number the ASCII digits at [from, to) of `text` write, or -1 where one is not a digit. */
function digitsAt(text: string, from: number, to: number): number {
  let value = 0;
  for (let at = from; at < to; at++) {
    const digit = text.charCodeAt(at) - 48;
    if (!(digit >= 0 && digit <= 9)) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/** An RFC 3339 date-time's fields, unchecked against the calendar. */
interface Rfc3339Fields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  fraction_digits: number;
  offset_hours: number;
  offset_minutes: number;
}

/** The fields of `value` read by position: "YYYY-MM-DDThh:mm:ss", an optional fraction, then "Z"
 *  or "±hh:mm" ending the text. Undefined when the text has another shape. */
function rfc3339Fields(value: string): Rfc3339Fields | undefined {
  // A writer's bug may hand over another type: it is no time, as the pattern this replaced said.
  if (typeof value !== "string" || value.length < 20) return undefined;
  const separators_hold = value[4] === "-" && value[7] === "-" && value[10] === "T" && value[13] === ":" && value[16] === ":";
  const [year, month, day] = [digitsAt(value, 0, 4), digitsAt(value, 5, 7), digitsAt(value, 8, 10)];
  const [hour, minute, second] = [digitsAt(value, 11, 13), digitsAt(value, 14, 16), digitsAt(value, 17, 19)];
  if (!separators_hold || Math.min(year, month, day, hour, minute, second) < 0) return undefined;
  let at = 19;
  if (value[at] === ".") {
    const first = at + 1;
    for (at = first; at < value.length && digitsAt(value, at, at + 1) >= 0; at++);
    if (at === first) return undefined;
  }
  const fraction_digits = value[19] === "." ? at - 20 : 0;
  if (value[at] === "Z" && at + 1 === value.length) {
    return { year, month, day, hour, minute, second, fraction_digits, offset_hours: 0, offset_minutes: 0 };
  }
  const signed = value[at] === "+" || value[at] === "-";
  const [offset_hours, offset_minutes] = [digitsAt(value, at + 1, at + 3), digitsAt(value, at + 4, at + 6)];
  if (!signed || value[at + 3] !== ":" || at + 6 !== value.length || offset_hours < 0 || offset_minutes < 0) return undefined;
  return { year, month, day, hour, minute, second, fraction_digits, offset_hours, offset_minutes };
}

/**
 * What keeps `value` from being an RFC 3339 date-time with seconds and a zone (`Z` or `±hh:mm`),
 * at most 9 fraction digits, naming a time that exists — or undefined when it is one. V8's
 * Date.parse takes "2027-02-30" as 2027-03-02 and "24:00:00" as the next day's midnight, so every
 * calendar field is checked here. No leap second (`:60`): Date.parse refuses it, and the docs
 * promise seconds 00–59. Offsets are at most ±23:59. The reason follows a field's name ("expires_at
 * …") and says what to change. Read by position rather than by a regex: every ingested record
 * and entry has its time checked, and a regex's captures cost more than the rest.
 */
export function rfc3339Problem(value: string): string | undefined {
  const fields = rfc3339Fields(value);
  if (!fields) return 'must be an RFC 3339 time with an offset, e.g. "2026-12-31T18:30:00Z" or "2027-01-01T00:00:00+05:30"';
  const { year, month, day } = fields;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return `names a date that does not exist (${value.slice(0, 10)})`;
  if (fields.hour > 23 || fields.minute > 59 || fields.second > 59) {
    return `names a time of day that does not exist (${value.slice(11, 19)}; hours 00–23, minutes and seconds 00–59)`;
  }
  if (fields.offset_hours > 23 || fields.offset_minutes > 59) return "has an offset beyond ±23:59";
  if (fields.fraction_digits > rfc3339_fraction_digits_max) return `has more than ${rfc3339_fraction_digits_max} fraction digits (the log keeps at most nanoseconds)`;
  if (Number.isNaN(Date.parse(value))) return "is outside the range of times this server can read";
  return undefined;
}

/** An RFC 3339 date-time naming a time that exists (rfc3339Problem finds nothing). */
export function isRfc3339(value: string): boolean {
  return rfc3339Problem(value) === undefined;
}

function checkInput(input: AppendInput): void {
  if (!isEntryKind(input.kind)) throw new EvidenceInputError(`unknown evidence kind ${JSON.stringify(input.kind)}`);
  if (typeof input.source !== "string" || input.source.length === 0 || input.source.length > source_chars_max) {
    throw new EvidenceInputError(`source must be 1..${source_chars_max} characters`);
  }
  if (input.body === null || typeof input.body !== "object" || Array.isArray(input.body)) {
    throw new EvidenceInputError("body must be a JSON object");
  }
  if (input.occurred_at !== undefined && !isRfc3339(input.occurred_at)) {
    throw new EvidenceInputError("occurred_at must be an RFC 3339 time");
  }
  if (input.body_sha256 !== undefined && !isHexSha256(input.body_sha256)) {
    throw new EvidenceInputError("body_sha256 must be 64 lower-case hex digits");
  }
}

export interface BuiltEntry {
  entry: Entry;
  /** The canonical bytes, stored and exported verbatim. */
  text: string;
  leafHash: Buffer;
}

/**
 * The entry's RFC 8785 text, assembled around the body's canonical text so the body is
 * serialized once. Keys in code-unit order: body, body_sha256, kind, occurred_at,
 * received_at, seq, source, v (a test checks this equals canonicalJson(entry)).
 */
function entryText(entry: Entry, bodyText: string): string {
  const occurred = entry.occurred_at === undefined ? "" : `"occurred_at":${canonicalJson(entry.occurred_at)},`;
  return (
    `{"body":${bodyText},"body_sha256":"${entry.body_sha256}","kind":${canonicalJson(entry.kind)},${occurred}` +
    `"received_at":${canonicalJson(entry.received_at)},"seq":${entry.seq},"source":${canonicalJson(entry.source)},"v":${entry.v}}`
  );
}

/**
 * Builds the entry for `seq`: stores the scrubbed body, and binds it by hash. The hash is of the
 * body as stored, never of a secret scrubbing hid: a plain hash of a guessable value (a CVV, a
 * PIN) gives the value away to whoever reads the entry. Whoever holds the original body proves
 * it by scrubbing it the same way (scrub), which reproduces the stored body and its hash.
 */
export function buildEntry(input: AppendInput, seq: number, received_at: string): BuiltEntry {
  checkInput(input);
  if (!Number.isSafeInteger(seq) || seq < 0) throw new EvidenceInputError("seq must be a non-negative integer");
  const { text: bodyText, redactions } = scrubbedCanonicalJson(input.body);
  // With nothing redacted the scrubbed body is the body itself: no copy.
  const body = redactions === 0 ? input.body : scrub(input.body);
  const entry: Entry = {
    v: entry_version,
    seq,
    kind: input.kind,
    source: input.source,
    received_at,
    ...(input.occurred_at === undefined ? {} : { occurred_at: input.occurred_at }),
    body_sha256: input.body_sha256 ?? sha256Hex(bodyText),
    body,
  };
  const text = entryText(entry, bodyText);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > entry_bytes_max) throw new EntryTooLargeError(seq, bytes);
  return { entry, text, leafHash: leafHash(text) };
}

const entry_keys = new Set(["v", "seq", "kind", "source", "received_at", "occurred_at", "body_sha256", "body"]);

/** Checks that a parsed JSON value has exactly the entry shape; returns a reason when not. */
export function entryShapeProblem(value: unknown): string | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "not a JSON object";
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) if (!entry_keys.has(key)) return `unexpected field ${jsonPreview(key)}`;
  if (record.v !== entry_version) return `unsupported version ${jsonPreview(record.v)}`;
  if (!Number.isSafeInteger(record.seq) || (record.seq as number) < 0) return "seq is not a non-negative integer";
  if (typeof record.kind !== "string" || !isEntryKind(record.kind)) return "kind is not a known kind";
  if (typeof record.source !== "string") return "source is not a string";
  if (typeof record.received_at !== "string") return "received_at is not a string";
  if (record.occurred_at !== undefined && typeof record.occurred_at !== "string") return "occurred_at is not a string";
  if (!isHexSha256(record.body_sha256)) return "body_sha256 is not a hex SHA-256";
  if (record.body === null || typeof record.body !== "object" || Array.isArray(record.body)) return "body is not an object";
  return undefined;
}
