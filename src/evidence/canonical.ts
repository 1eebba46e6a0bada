// RFC 8785 (JCS) canonical JSON and the SHA-256 helpers built on it: the one way
// evidence turns a value into bytes, so a hash computed anywhere agrees with ours.

import { hash } from "node:crypto";
import { lone_surrogate, not_a_finite_number } from "../policy/text.js";

/** Nesting deeper than this is refused: evidence comes from bounded JSON, so it is a bug guard. */
export const canonical_depth_max = 256;
/** Strings up to this length are checked for escapes by a character loop (cheaper than a regex call). */
const string_loop_chars_max = 64;
/** Quoted object keys are remembered (keys repeat across records); only short keys, and only this many. */
const quoted_keys_max = 10_000;
const quoted_key_chars_max = 64;
/** Objects with at most this many keys are sorted by insertion sort (cheaper than Array#sort when small). */
const insertion_sort_keys_max = 12;

/** Thrown when a value has no JSON form (undefined at the top, a function, a bigint, NaN). */
export class CanonicalJsonError extends Error {
  override name = "CanonicalJsonError";
}

/** Anything JSON.stringify would escape (", \, controls) or that needs the surrogate check. */
const needs_escape = /[\u0000-\u001f"\\\uD800-\uDFFF]/;
/** A lone surrogate has no UTF-8 form, so no RFC 8785 form (the check lives with the pure policy, which refuses such keys). */
export { hasLoneSurrogate } from "../policy/text.js";

function escapedString(value: string): string {
  // RFC 8785 strings are JSON.stringify's; a lone surrogate has no UTF-8 form and is refused.
  if (lone_surrogate.test(value)) throw new CanonicalJsonError("a string has a lone surrogate");
  return JSON.stringify(value);
}

export function canonicalString(value: string): string {
  const length = value.length;
  if (length <= string_loop_chars_max) {
    for (let i = 0; i < length; i++) {
      const code = value.charCodeAt(i);
      if (code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff)) return escapedString(value);
    }
    return `"${value}"`;
  }
  // Without anything to escape, JSON.stringify would only add the quotes.
  return needs_escape.test(value) ? escapedString(value) : `"${value}"`;
}

const quoted_keys = new Map<string, string>();

export function canonicalKey(key: string): string {
  const known = quoted_keys.get(key);
  if (known !== undefined) return known;
  const quoted = canonicalString(key);
  if (key.length <= quoted_key_chars_max && quoted_keys.size < quoted_keys_max) quoted_keys.set(key, quoted);
  return quoted;
}

/** RFC 8785 property order: UTF-16 code units, which is what `<` on strings compares. */
export function sortKeys(keys: string[]): void {
  if (keys.length > insertion_sort_keys_max) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
}

function skipped(value: unknown): boolean {
  return value === undefined || typeof value === "function" || typeof value === "symbol";
}

function canonicalObject(value: Record<string, unknown>, depth: number): string {
  const keys = Object.keys(value);
  sortKeys(keys);
  let out = "{";
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const item = value[key];
    if (skipped(item)) continue;
    out += `${first ? "" : ","}${canonicalKey(key)}:${canonicalValue(item, depth + 1)}`;
    first = false;
  }
  return `${out}}`;
}

function canonicalArray(value: readonly unknown[], depth: number): string {
  let out = "[";
  for (let i = 0; i < value.length; i++) {
    const item = value[i];
    if (i > 0) out += ",";
    out += skipped(item) ? "null" : canonicalValue(item, depth + 1);
  }
  return `${out}]`;
}

/** ECMAScript number serialization is RFC 8785's (and -0 is 0); String() of a finite number is JSON.stringify's. */
export function canonicalNumber(value: number): string {
  if (!Number.isFinite(value)) throw new CanonicalJsonError(`${value} is not a JSON number`);
  return `${value}`;
}

function canonicalValue(value: unknown, depth: number): string {
  if (depth > canonical_depth_max) throw new CanonicalJsonError(`nesting deeper than ${canonical_depth_max}`);
  switch (typeof value) {
    case "string":
      return canonicalString(value);
    case "number":
      return canonicalNumber(value);
    case "boolean":
      return value ? "true" : "false";
    case "object": {
      if (value === null) return "null";
      const json = (value as { toJSON?: () => unknown }).toJSON;
      if (typeof json === "function") return canonicalValue(json.call(value), depth + 1);
      if (Array.isArray(value)) return canonicalArray(value, depth);
      return canonicalObject(value as Record<string, unknown>, depth);
    }
    default:
      throw new CanonicalJsonError(`a ${typeof value} has no JSON form`);
  }
}

/**
 * The RFC 8785 (JCS) text of `value`. Byte-identical to the npm `canonicalize` package on every
 * JSON value (a property test holds them side by side); written out because this runs for every
 * evidence entry, ingest record and receipt, and the package's per-character surrogate scan
 * dominated appends.
 */
export function canonicalJson(value: unknown): string {
  return canonicalValue(value, 0);
}

/** What `representable` puts in place of a number JSON cannot carry (not_a_finite_number: a
 *  literal such as 1e400 parses to Infinity), and of a subtree nested past representable_depth_max. */
export { not_a_finite_number } from "../policy/text.js";
export const nested_too_deep = "[nested too deep]";
/** Below canonical_depth_max, leaving room for the evidence body a value is recorded in. */
export const representable_depth_max = canonical_depth_max - 16;
const lone_surrogates = new RegExp(lone_surrogate.source, "g");

function wellFormed(text: string): string {
  return lone_surrogate.test(text) ? text.replace(lone_surrogates, "\uFFFD") : text;
}

/**
 * `value` with what RFC 8785 cannot write replaced: non-finite numbers and subtrees nested too
 * deep by the markers above, lone surrogates in strings and keys by U+FFFD. Anything parsed from
 * JSON can then be hashed and recorded as evidence. Returns `value` itself when nothing needed
 * replacing, and copies only the objects and arrays on the way to a replacement.
 */
export function representable(value: unknown, depth = 0): unknown {
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? value : not_a_finite_number;
    case "string":
      return wellFormed(value);
    case "object": {
      if (value === null) return value;
      if (depth >= representable_depth_max) return nested_too_deep;
      if (Array.isArray(value)) {
        let copy: unknown[] | undefined;
        value.forEach((item, index) => {
          const fixed = representable(item, depth + 1);
          if (fixed !== item) (copy ??= [...value])[index] = fixed;
        });
        return copy ?? value;
      }
      const entries = Object.entries(value);
      let changed = false;
      const fixed = entries.map(([key, item]): [string, unknown] => {
        const pair: [string, unknown] = [wellFormed(key), representable(item, depth + 1)];
        if (pair[0] !== key || pair[1] !== item) changed = true;
        return pair;
      });
      // fromEntries defines own properties, so a "__proto__" key stays a key.
      return changed ? Object.fromEntries(fixed) : value;
    }
    default:
      return value;
  }
}

export function sha256(data: string | Uint8Array): Buffer {
  return hash("sha256", data, "buffer");
}

/** One-shot crypto.hash: the same bytes as createHash (strings as UTF-8) without a Hash object per call. */
export function sha256Hex(data: string | Uint8Array): string {
  return hash("sha256", data, "hex");
}

/** Hex SHA-256 of the canonical JSON of `value` (e.g. a decision record's `args_hash`). */
export function canonicalSha256Hex(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

const hex_sha256_pattern = /^[0-9a-f]{64}$/;

export function isHexSha256(value: unknown): value is string {
  return typeof value === "string" && hex_sha256_pattern.test(value);
}
