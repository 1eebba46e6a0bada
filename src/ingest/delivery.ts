// Splitting a delivery into records as received: one JSON object, a JSON array, or NDJSON
// (LF or CRLF, blank lines and a trailing newline ignored). Each record keeps the bytes its
// hash binds: the exact bytes of a single object or NDJSON line (its JSON text, without the
// line ending or surrounding whitespace), RFC 8785 for array elements.

import { isUtf8 } from "node:buffer";
import { CanonicalJsonError, canonicalJson, sha256Hex } from "../evidence/index.js";
import { records_per_delivery_max } from "../evidence/index.js";
import { HttpError } from "../errors.js";
import { duplicate_keys_reported_max, firstDuplicateKeyPath, unkeptPlaces } from "./duplicate-keys.js";
import { holdsInexactNumber } from "./numbers.js";

/** DESIGN: a delivery is at most 2 MiB, refused with 413 before parsing. */
export const delivery_bytes_max = 2_097_152;
export { records_per_delivery_max };

export type DeliveryForm = "object" | "array" | "ndjson";

export interface ReceivedRecord {
  /** 0-based position in the delivery (NDJSON: among the non-blank lines). */
  index: number;
  /** The parsed JSON value, or undefined when the record's bytes are not JSON. */
  value: unknown;
  /** Hex SHA-256 of the record as received. */
  sha256: string;
  /** Set when the record is not JSON. */
  syntax_error?: string;
  /** Set when an array element parsed but has no RFC 8785 form to hash (a lone surrogate, 1e400):
   *  validation names the place; sha256 is then empty. */
  unhashable?: string;
  /** The path of a key that occurs twice in one object of the record (JSON.parse kept the last). */
  duplicate_key?: string;
  /** The path of a number JSON.parse read as another (more digits than a double keeps, or 1e-400). */
  inexact_number?: string;
}

export interface SplitDelivery {
  form: DeliveryForm;
  records: ReceivedRecord[];
}

const json_whitespace = new Set([0x20, 0x09, 0x0a, 0x0d]);


function trimmedBounds(bytes: Buffer): [number, number] {
  let start = 0;
  let end = bytes.length;
  while (start < end && json_whitespace.has(bytes[start]!)) start++;
  while (end > start && json_whitespace.has(bytes[end - 1]!)) end--;
  return [start, end];
}

/** True when `bytes` hold only JSON whitespace: an NDJSON line the server skips as blank. */
export function isBlankLine(bytes: Buffer): boolean {
  const [start, end] = trimmedBounds(bytes);
  return start === end;
}

/** A lead byte's sequence length and the range its second byte must fall in: RFC 3629's table,
 *  which leaves out overlong forms, UTF-16 surrogates and code points past U+10FFFF. */
function utf8Sequence(lead: number): [length: number, low: number, high: number] | undefined {
  if (lead >= 0xc2 && lead <= 0xdf) return [2, 0x80, 0xbf];
  if (lead === 0xe0) return [3, 0xa0, 0xbf];
  if (lead === 0xed) return [3, 0x80, 0x9f];
  if (lead >= 0xe1 && lead <= 0xef) return [3, 0x80, 0xbf];
  if (lead === 0xf0) return [4, 0x90, 0xbf];
  if (lead >= 0xf1 && lead <= 0xf3) return [4, 0x80, 0xbf];
  if (lead === 0xf4) return [4, 0x80, 0x8f];
  return undefined;
}

/** Where the first sequence that is not well-formed UTF-8 begins; -1 when there is none. */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const sequence = utf8Sequence(lead);
    if (!sequence || i + sequence[0] > bytes.length) return i;
    const [length, low, high] = sequence;
    if (bytes[i + 1]! < low || bytes[i + 1]! > high) return i;
    for (let k = 2; k < length; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return i;
    i += length;
  }
  return -1;
}

/** JSON is UTF-8 (RFC 8259). Decoded leniently, each bad byte would become U+FFFD: text that is
 *  not what was hashed, and three bytes for one. */
function notUtf8(raw: Buffer): HttpError {
  const offset = invalidUtf8Offset(raw);
  return new HttpError(400, "malformed", `the delivery is not valid UTF-8 (byte ${offset} begins no well-formed sequence)`, { offset });
}

/** U+FEFF, the byte order mark, as UTF-8: what some editors and PowerShell 5 write at the start of a file. */
const utf8_byte_order_mark = Buffer.from([0xef, 0xbb, 0xbf]);
const startsWithByteOrderMark = (bytes: Buffer) => bytes.subarray(0, utf8_byte_order_mark.length).equals(utf8_byte_order_mark);
const byte_order_mark_advice = "send UTF-8 without a byte order mark (bursar send-decisions leaves out the one a file starts with)";

/**
 * A delivery that starts with a byte order mark. Read as part of the first record's JSON, it made
 * a 422 quoting an invisible token. It is not left out either: a signed or pushed delivery's
 * records are hashed as received, and RFC 8259 forbids one in JSON sent over a network.
 */
function byteOrderMark(offset: number): HttpError {
  return new HttpError(400, "byte_order_mark", `the delivery starts with a UTF-8 byte order mark (bytes EF BB BF, U+FEFF) at byte ${offset}; ${byte_order_mark_advice}`, { offset });
}

/** The operator's upload is a file's contents: one byte order mark at its very start, which an
 *  editor may have written, is left out, as bursar send-decisions leaves it out of a FILE. */
export function withoutByteOrderMark(raw: Buffer): Buffer {
  return startsWithByteOrderMark(raw) ? raw.subarray(utf8_byte_order_mark.length) : raw;
}

/** A delivery that holds no record: an empty body, only blank lines, or an empty array. */
function empty(): HttpError {
  return new HttpError(400, "empty_delivery", "the delivery holds no record");
}

function tooMany(count: number): HttpError {
  return new HttpError(413, "too_many_records", `a delivery holds at most ${records_per_delivery_max} records; this one has ${count}`, {
    limit: records_per_delivery_max,
    records: count,
  });
}

function parseJson(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function splitArray(text: string): SplitDelivery {
  const parsed = parseJson(text);
  if ("error" in parsed) throw new HttpError(400, "malformed", `the delivery is not valid JSON: ${parsed.error}`);
  const elements = parsed.value as unknown[];
  if (elements.length === 0) throw empty();
  if (elements.length > records_per_delivery_max) throw tooMany(elements.length);
  const records = elements.map((value, index): ReceivedRecord => {
    try {
      return { index, value, sha256: sha256Hex(canonicalJson(value)) };
    } catch (error) {
      if (!(error instanceof CanonicalJsonError)) throw error;
      return { index, value, sha256: "", unhashable: error.message };
    }
  });
  // Paths in the array start with the element's index: the first such place of each element.
  for (const { path, problem } of unkeptPlaces(text, records.length)) {
    const dot = path.indexOf(".");
    const record = records[Number(dot < 0 ? path : path.slice(0, dot))];
    if (record) record[problem] = dot < 0 ? "(record)" : path.slice(dot + 1);
  }
  return { form: "array", records };
}

/** Lines split on LF; the line ending (LF or CRLF) and JSON whitespace around the line's text
 *  are not part of the record's bytes, so an object hashes the same alone or as a line. */
function ndjsonLines(bytes: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  while (start <= bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    const line = bytes.subarray(start, end);
    const [from, to] = trimmedBounds(line);
    if (to > from) {
      lines.push(line.subarray(from, to));
      if (lines.length > records_per_delivery_max) throw tooMany(countLines(bytes));
    }
    start = end + 1;
  }
  return lines;
}

function countLines(bytes: Buffer): number {
  let count = 0;
  for (const line of bytes.toString("utf8").split("\n")) if (line.trim() !== "") count++;
  return count;
}

/** A record parsed from its own text: with the first key it holds twice and the first number
 *  JSON.parse read as another, if any. */
function parsedRecord(index: number, text: string, value: unknown, sha256: string): ReceivedRecord {
  const duplicate = firstDuplicateKeyPath(text, value);
  // The places are in text order, keys twice among them: past those, the first number read as another.
  const places = holdsInexactNumber(text) ? unkeptPlaces(text, duplicate === undefined ? 1 : duplicate_keys_reported_max) : [];
  const place = places.find((found) => found.problem === "inexact_number");
  return { index, value, sha256, ...(duplicate === undefined ? {} : { duplicate_key: duplicate }), ...(place ? { inexact_number: place.path } : {}) };
}

function splitNdjson(lines: readonly Buffer[]): SplitDelivery {
  const records = lines.map((line, index) => {
    const text = line.toString("utf8");
    const parsed = parseJson(text);
    const sha256 = sha256Hex(line);
    if (!("error" in parsed)) return parsedRecord(index, text, parsed.value, sha256);
    // A line of its own with a byte order mark: files joined by `cat`, each saved with one.
    const syntax_error = startsWithByteOrderMark(line) ? `it starts with a byte order mark (U+FEFF); ${byte_order_mark_advice}` : parsed.error;
    return { index, value: undefined, sha256, syntax_error };
  });
  return { form: "ndjson", records };
}

/** The whole body as one record when it is one JSON object, such as a pretty-printed one. */
function wholeObject(body: Buffer): SplitDelivery | undefined {
  const text = body.toString("utf8");
  const whole = parseJson(text);
  if ("error" in whole || whole.value === null || typeof whole.value !== "object" || Array.isArray(whole.value)) return undefined;
  return { form: "object", records: [parsedRecord(0, text, whole.value, sha256Hex(body))] };
}

/**
 * Splits a raw delivery; 400 when it is not UTF-8, starts with a byte order mark, holds nothing or
 * an array is not JSON, 413 above 500 records.
 * A body that is one JSON object is one record, even across lines; any other body is NDJSON. A
 * body of several lines that each parse is NDJSON without parsing it whole: it cannot also be
 * one object, since its first line is then a complete value with more text after it.
 */
export function splitDelivery(raw: Buffer): SplitDelivery {
  if (raw.length > delivery_bytes_max) throw new HttpError(413, "body_too_large", `a delivery is at most ${delivery_bytes_max} bytes`);
  // Checked once for the whole body, so each toString("utf8") below decodes exactly what was sent.
  if (!isUtf8(raw)) throw notUtf8(raw);
  const [start, end] = trimmedBounds(raw);
  if (start === end) throw empty();
  const body = raw.subarray(start, end);
  if (startsWithByteOrderMark(body)) throw byteOrderMark(start);
  if (body[0] === 0x5b /* [ */) return splitArray(body.toString("utf8"));
  if (!body.includes(0x0a)) return wholeObject(body) ?? splitNdjson(ndjsonLines(raw));
  let lines: Buffer[];
  try {
    lines = ndjsonLines(raw);
  } catch (too_many) {
    const object = wholeObject(body);
    if (object) return object;
    throw too_many;
  }
  const split = splitNdjson(lines);
  if (split.records.every((record) => record.syntax_error === undefined)) return split;
  return wholeObject(body) ?? split;
}
