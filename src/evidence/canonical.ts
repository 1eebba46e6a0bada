// RFC 8785 (JCS) canonical JSON and the SHA-256 helpers built on it: the one way
// evidence turns a value into bytes, so a hash computed anywhere agrees with ours.

import { createHash } from "node:crypto";

/** Nesting deeper than this is refused: evidence comes from bounded JSON, so it is a bug guard. */
export const canonical_depth_max = 256;

/** Thrown when a value has no JSON form (undefined at the top, a function, a bigint, NaN). */
export class CanonicalJsonError extends Error {
  override name = "CanonicalJsonError";
}

const has_surrogate = /[\uD800-\uDFFF]/;
const lone_surrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function canonicalString(value: string): string {
  // RFC 8785 strings are JSON.stringify's; a lone surrogate has no UTF-8 form and is refused.
  if (has_surrogate.test(value) && lone_surrogate.test(value)) throw new CanonicalJsonError("a string has a lone surrogate");
  return JSON.stringify(value);
}

function skipped(value: unknown): boolean {
  return value === undefined || typeof value === "function" || typeof value === "symbol";
}

function canonicalObject(value: Record<string, unknown>, depth: number): string {
  let out = "{";
  // Default sort compares UTF-16 code units, which is RFC 8785's property order.
  for (const key of Object.keys(value).sort()) {
    const item = value[key];
    if (skipped(item)) continue;
    if (out.length > 1) out += ",";
    out += `${canonicalString(key)}:${canonicalValue(item, depth + 1)}`;
  }
  return `${out}}`;
}

function canonicalValue(value: unknown, depth: number): string {
  if (depth > canonical_depth_max) throw new CanonicalJsonError(`nesting deeper than ${canonical_depth_max}`);
  switch (typeof value) {
    case "string":
      return canonicalString(value);
    case "number":
      // ECMAScript number serialization is RFC 8785's (and -0 is 0).
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`${value} is not a JSON number`);
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object": {
      if (value === null) return "null";
      const json = (value as { toJSON?: () => unknown }).toJSON;
      if (typeof json === "function") return canonicalValue(json.call(value), depth + 1);
      if (Array.isArray(value)) return `[${value.map((item) => (skipped(item) ? "null" : canonicalValue(item, depth + 1))).join(",")}]`;
      return canonicalObject(value as Record<string, unknown>, depth);
    }
    default:
      throw new CanonicalJsonError(`a ${typeof value} has no JSON form`);
  }
}

/**
 * The RFC 8785 (JCS) text of `value`. Byte-identical to the npm `canonicalize` package on every
 * JSON value (a property test holds them side by side); written out because this runs for every
 * evidence entry and the package's per-character surrogate scan dominated appends.
 */
export function canonicalJson(value: unknown): string {
  return canonicalValue(value, 0);
}

export function sha256(data: string | Uint8Array): Buffer {
  return createHash("sha256").update(data).digest();
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Hex SHA-256 of the canonical JSON of `value` (e.g. a decision record's `args_hash`). */
export function canonicalSha256Hex(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

const hex_sha256_pattern = /^[0-9a-f]{64}$/;

export function isHexSha256(value: unknown): value is string {
  return typeof value === "string" && hex_sha256_pattern.test(value);
}
