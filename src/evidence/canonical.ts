// RFC 8785 (JCS) canonical JSON and the SHA-256 helpers built on it: the one way
// evidence turns a value into bytes, so a hash computed anywhere agrees with ours.

import { createHash } from "node:crypto";
import canonicalize from "canonicalize";

/** Thrown when a value has no JSON form (undefined at the top, a function, a bigint, NaN). */
export class CanonicalJsonError extends Error {
  override name = "CanonicalJsonError";
}

/** The RFC 8785 text of `value`. Throws CanonicalJsonError for values JSON cannot carry. */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (error) {
    throw new CanonicalJsonError(`value has no canonical JSON form: ${(error as Error).message}`);
  }
  if (text === undefined) throw new CanonicalJsonError("value has no canonical JSON form");
  return text;
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
