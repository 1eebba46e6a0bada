// Identifiers and tokens. Ids are injectable so the eval harness gets deterministic reports.

import { randomBytes } from "node:crypto";

export type IdSource = (prefix: string) => string;

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Random bytes are drawn from the CSPRNG in pages: one call per id costs more than the id. */
const random_page_bytes = 4096;
let random_page = Buffer.alloc(0);
let random_offset = 0;

function randomByte(): number {
  if (random_offset >= random_page.length) {
    random_page = randomBytes(random_page_bytes);
    random_offset = 0;
  }
  return random_page[random_offset++] as number;
}

/** Unbiased base62: bytes of 248 and above (4 × 62) are skipped. */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += base62[byte % 62];
  }
  return out;
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

/** Hex SHA-256 of tokens and keys: the evidence log's one-shot helper. */
export { sha256Hex } from "./evidence/canonical.js";
