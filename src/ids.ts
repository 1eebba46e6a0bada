// Identifiers and tokens. Ids are injectable so the eval harness gets deterministic reports.

import { createHash, randomBytes } from "node:crypto";

export type IdSource = (prefix: string) => string;

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export function randomBase62(length: number): string {
  const bytes = randomBytes(length * 2);
  let out = "";
  for (let index = 0; out.length < length && index < bytes.length; index++) {
    const byte = bytes[index] as number;
    if (byte < 248) out += base62[byte % 62];
  }
  return out.length === length ? out : randomBase62(length);
}

export const randomIds: IdSource = (prefix) => `${prefix}_${randomBase62(16)}`;

/** Deterministic ids for tests and the eval harness: prefix_000001, prefix_000002, ... */
export function sequentialIds(): IdSource {
  const counters = new Map<string, number>();
  return (prefix) => {
    const next = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, next);
    return `${prefix}_${String(next).padStart(6, "0")}`;
  };
}

/** A bearer secret: 32 random bytes, base64url, behind a readable prefix. */
export function newToken(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString("base64url")}`;
}

export function sha256Hex(value: string | Uint8Array): string {
  return createHash("sha256").update(value).digest("hex");
}
