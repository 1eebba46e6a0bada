// `Bursar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, t + "." + body)>`, checked in
// named steps (header, timestamp, signature), each failure one typed 401. Several v1 values
// are allowed so a sender can sign with the old and the new key during rotation.

import { createHmac, timingSafeEqual } from "node:crypto";
import { HttpError } from "../errors.js";

export const signature_header = "bursar-signature";
export const signature_tolerance_seconds = 300;
export const signature_header_chars_max = 2048;
export const signatures_per_header_max = 8;
const hex_sha256_bytes = 32;

export type SignatureFailure = "signature_missing" | "signature_malformed" | "signature_stale" | "signature_mismatch";

export class SignatureError extends HttpError {
  constructor(
    readonly failure: SignatureFailure,
    message: string,
  ) {
    super(401, failure, message);
  }
}

export interface ParsedSignature {
  timestamp_seconds: number;
  signatures: Buffer[];
}

/** Step 1: the header's shape. Unknown schemes (v0=, v2=) are ignored, as Stripe-style senders expect. */
export function parseSignatureHeader(header: string | undefined): ParsedSignature {
  if (header === undefined || header.trim() === "") throw new SignatureError("signature_missing", "the Bursar-Signature header is required");
  if (header.length > signature_header_chars_max) throw new SignatureError("signature_malformed", "the Bursar-Signature header is too long");
  let timestamp_seconds: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const separator = part.indexOf("=");
    if (separator <= 0) throw new SignatureError("signature_malformed", "the Bursar-Signature header must be t=<seconds>,v1=<hex>");
    const key = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (key === "t") {
      // No leading zeros: the HMAC covers t as sent, and "017…" would not be the number's own text.
      if (timestamp_seconds !== undefined || !/^(?:0|[1-9]\d{0,11})$/.test(value)) {
        throw new SignatureError("signature_malformed", "t must appear once, as unix seconds without leading zeros");
      }
      timestamp_seconds = Number(value);
    } else if (key === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) throw new SignatureError("signature_malformed", "v1 must be 64 hex digits");
      signatures.push(Buffer.from(value, "hex"));
    }
  }
  if (timestamp_seconds === undefined) throw new SignatureError("signature_malformed", "the Bursar-Signature header has no t=");
  if (signatures.length === 0) throw new SignatureError("signature_malformed", "the Bursar-Signature header has no v1=");
  if (signatures.length > signatures_per_header_max) throw new SignatureError("signature_malformed", `at most ${signatures_per_header_max} v1 values`);
  return { timestamp_seconds, signatures };
}

/** Step 2: the timestamp is within the tolerance of now, both ways. */
export function checkTimestamp(parsed: ParsedSignature, now: Date): void {
  const skew_seconds = Math.abs(Math.floor(now.getTime() / 1000) - parsed.timestamp_seconds);
  if (skew_seconds > signature_tolerance_seconds) {
    throw new SignatureError("signature_stale", `the signature's t is more than ${signature_tolerance_seconds} s from the server's clock`);
  }
}

/** HMAC-SHA256 over `t + "." + body`; the key is the UTF-8 bytes of the signing key string. */
export function signatureOf(signing_key: string, timestamp_seconds: number, body: Uint8Array): Buffer {
  return createHmac("sha256", Buffer.from(signing_key, "utf8")).update(`${timestamp_seconds}.`).update(body).digest();
}

/**
 * Step 3: any v1 matches any currently valid key; every pair is compared in constant time.
 * Returns the indexes of the keys some v1 matched (a sender mid-rotation signs with both).
 */
export function checkSignature(parsed: ParsedSignature, signing_keys: readonly string[], body: Uint8Array): number[] {
  const matched: number[] = [];
  signing_keys.forEach((key, index) => {
    const expected = signatureOf(key, parsed.timestamp_seconds, body);
    let match = false;
    for (const given of parsed.signatures) {
      if (given.length === hex_sha256_bytes && timingSafeEqual(given, expected)) match = true;
    }
    if (match) matched.push(index);
  });
  if (matched.length === 0) throw new SignatureError("signature_mismatch", "no v1 signature matches this source's signing key");
  return matched;
}

/** All three steps; the indexes of the keys that matched. */
export function verifySignature(header: string | undefined, signing_keys: readonly string[], body: Uint8Array, now: Date): number[] {
  const parsed = parseSignatureHeader(header);
  checkTimestamp(parsed, now);
  return checkSignature(parsed, signing_keys, body);
}

/** The header a sender attaches (the CLI and tests use it; integrators copy it). */
export function signatureHeader(signing_keys: readonly string[], body: Uint8Array, now: Date): string {
  const t = Math.floor(now.getTime() / 1000);
  return [`t=${t}`, ...signing_keys.map((key) => `v1=${signatureOf(key, t, body).toString("hex")}`)].join(",");
}
