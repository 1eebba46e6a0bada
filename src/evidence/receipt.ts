// Signed receipts, issued at append time before any checkpoint: one per entry over
// {origin, log, seq, leaf_hash, kind, at}, and one per ingest delivery listing every record.
// v2 receipts name their log (its origin and the leaf hash of its entry 0); v1 receipts, issued
// before that, named neither and still verify where a signed checkpoint covers their entries.

import { sign, verify } from "node:crypto";
import { CanonicalJsonError, canonicalJson, hasLoneSurrogate, isHexSha256 } from "./canonical.js";
import type { ProofCheck } from "./merkle.js";
import { decodeBase64Strict, keyIdHex, type NoteSigner, type NoteVerifier } from "./note.js";
import { jsonPreview } from "../json-text.js";

/**
 * Domain-separation prefixes: a receipt signature can never be replayed as a note or the other
 * receipt, nor one version's message as the other's (a v2 receipt stripped of `log` is no v1 receipt).
 */
export const receipt_context_v1 = "bursar/receipt/v1\n";
export const receipt_context_v2 = "bursar/receipt/v2\n";
export const delivery_receipt_context_v1 = "bursar/delivery-receipt/v1\n";
export const delivery_receipt_context_v2 = "bursar/delivery-receipt/v2\n";
/** DESIGN: a delivery holds at most 500 records. */
export const records_per_delivery_max = 500;

/**
 * Which log a v2 receipt belongs to, signed into it: two logs that share a key (staging and
 * prod, or a store reset under the same origin) issue receipts that verify only as their own.
 */
export interface LogIdentity {
  /** The log's origin (its checkpoints' first line): signed, not carried; the verifier knows it. */
  origin: string;
  /** Hex leaf hash of the log's entry 0 (its system.genesis): signed and carried as `log`. */
  log: string;
}

export interface ReceiptFields {
  seq: number;
  /** Hex RFC 6962 leaf hash of the entry. */
  leaf_hash: string;
  kind: string;
  /** The entry's received_at. */
  at: string;
}

export interface Receipt extends ReceiptFields {
  /** v2: hex leaf hash of the log's entry 0. Absent from v1 receipts, which do not name their log. */
  log?: string;
  /** Hex key id of the log key that signed it (not signed itself). */
  key_id: string;
  /**
   * Base64 Ed25519 signature: v2 over receipt_context_v2 + canonical JSON of
   * {origin, log, seq, leaf_hash, kind, at}; v1 over receipt_context_v1 + canonical JSON of the four fields.
   */
  signature: string;
}

function receiptMessage(fields: ReceiptFields, identity: LogIdentity | undefined): Buffer {
  const { seq, leaf_hash, kind, at } = fields;
  if (identity === undefined) return Buffer.from(receipt_context_v1 + canonicalJson({ seq, leaf_hash, kind, at }), "utf8");
  const { origin, log } = identity;
  return Buffer.from(receipt_context_v2 + canonicalJson({ origin, log, seq, leaf_hash, kind, at }), "utf8");
}

/** Signs a v2 receipt: the log's identity is signed with the entry's fields, and `log` carried. */
export function signReceiptFields(signer: NoteSigner, fields: ReceiptFields, identity: LogIdentity): Receipt {
  if (!isHexSha256(identity.log)) throw new TypeError("a receipt's log is the hex leaf hash of the log's entry 0");
  const signature = sign(null, receiptMessage(fields, identity), signer.privateKey).toString("base64");
  return { seq: fields.seq, leaf_hash: fields.leaf_hash, kind: fields.kind, at: fields.at, log: identity.log, key_id: keyIdHex(signer.keyId), signature };
}

/**
 * Checks a receipt's signature: a v2 receipt (one that carries `log`) as one of the log of
 * `origin` (by default the key's name, as Bursar names its key) and of its own `log`, a v1
 * receipt under the key alone. Whether `log` is the log the caller holds is the caller's check.
 */
export function verifyReceipt(receipt: Receipt, verifier: NoteVerifier, origin: string = verifier.name): ProofCheck {
  if (receipt.key_id !== keyIdHex(verifier.keyId)) return { ok: false, reason: `receipt signed by key ${jsonPreview(receipt.key_id)}, not ${keyIdHex(verifier.keyId)}` };
  // A receipt read from an export is untrusted JSON: every signed field must have its type.
  const { seq, leaf_hash, kind, at, log, signature: signatureText } = receipt;
  if (!Number.isSafeInteger(seq) || !isHexSha256(leaf_hash) || typeof kind !== "string" || typeof at !== "string" || typeof signatureText !== "string") {
    return { ok: false, reason: "malformed receipt" };
  }
  if (log !== undefined && !isHexSha256(log)) return { ok: false, reason: "malformed receipt (its log is not a hex leaf hash)" };
  // Nothing signed has a lone surrogate (canonical JSON cannot write one): such a receipt is forged.
  if (hasLoneSurrogate(kind) || hasLoneSurrogate(at)) return { ok: false, reason: "malformed receipt" };
  // Strict, as a checkpoint's signature: Buffer.from also takes unpadded and URL-safe base64, so
  // several texts would pass for one signature, none of them the one the log wrote.
  const signature = decodeBase64Strict(signatureText);
  const identity = log === undefined ? undefined : { origin, log };
  const good = signature !== undefined && signature.length === 64 && verify(null, receiptMessage(receipt, identity), verifier.publicKey, signature);
  if (good) return { ok: true };
  return { ok: false, reason: identity ? `receipt signature does not verify as one of origin ${JSON.stringify(origin)}` : "receipt signature does not verify" };
}

/** One ingest record as its delivery receipt lists it. */
export interface DeliveryRecord {
  event_id: string;
  seq: number;
  leaf_hash: string;
  /** Hex SHA-256 of the record as received (its body_sha256). */
  sha256: string;
  occurred_at: string;
  received_at: string;
}

export interface DeliveryReceiptFields {
  /** The evidence source id the delivery came from. */
  source: string;
  received_at: string;
  records: DeliveryRecord[];
}

export interface DeliveryReceipt extends DeliveryReceiptFields {
  /** v2: hex leaf hash of the log's entry 0. Absent from v1 receipts, which do not name their log. */
  log?: string;
  key_id: string;
  /**
   * Base64 Ed25519 signature: v2 over delivery_receipt_context_v2 + canonical JSON of
   * {origin, log, source, received_at, records}; v1 over delivery_receipt_context_v1 + canonical
   * JSON of {source, received_at, records}.
   */
  signature: string;
}

const delivery_record_keys = 6;

/** A listed record as signing makes it: a plain object with exactly the six fields, each of its type. */
function isPlainDeliveryRecord(record: unknown): record is DeliveryRecord {
  if (typeof record !== "object" || record === null || Object.getPrototypeOf(record) !== Object.prototype) return false;
  const r = record as Record<string, unknown>;
  return (
    Object.keys(r).length === delivery_record_keys &&
    typeof r.event_id === "string" &&
    typeof r.leaf_hash === "string" &&
    typeof r.occurred_at === "string" &&
    typeof r.received_at === "string" &&
    typeof r.seq === "number" &&
    Number.isFinite(r.seq) &&
    typeof r.sha256 === "string"
  );
}

function isPlainRecordList(records: unknown): records is DeliveryRecord[] {
  if (!Array.isArray(records) || "toJSON" in records) return false;
  for (let i = 0; i < records.length; i++) if (!(i in records) || !isPlainDeliveryRecord(records[i])) return false;
  return true;
}

/**
 * The signed bytes: the context, then canonical JSON of {source, received_at, records}, with
 * the log's origin and log id as well for a v2 receipt (`identity` given). A receipt as signing
 * makes it (500 records are listed per delivery) is written by JSON.stringify with its keys in
 * RFC 8785 order, which for such fields is RFC 8785 except for a lone surrogate: JSON.stringify
 * escapes one as `\udXXX`, where RFC 8785 refuses it. Any `\ud` in the text (also the text of
 * an escaped backslash before "ud") therefore sends the fields down canonicalJson, as does
 * anything else, such as a receipt read from untrusted JSON. A property test holds the two side by side.
 */
export function deliveryMessage(fields: DeliveryReceiptFields, identity?: LogIdentity): Buffer {
  const { source, received_at, records } = fields;
  const context = identity === undefined ? delivery_receipt_context_v1 : delivery_receipt_context_v2;
  const signed = identity === undefined ? { source, received_at, records } : { origin: identity.origin, log: identity.log, source, received_at, records };
  const named = identity === undefined || (typeof identity.origin === "string" && typeof identity.log === "string");
  if (named && typeof source === "string" && typeof received_at === "string" && isPlainRecordList(records)) {
    // Keys in RFC 8785 order: log, origin, received_at, records, source.
    const identityText = identity === undefined ? "" : `"log":${JSON.stringify(identity.log)},"origin":${JSON.stringify(identity.origin)},`;
    const head = `${context}{${identityText}"received_at":${JSON.stringify(received_at)},"records":[`;
    const tail = `],"source":${JSON.stringify(source)}}`;
    const listed = records.map((r) =>
      JSON.stringify({ event_id: r.event_id, leaf_hash: r.leaf_hash, occurred_at: r.occurred_at, received_at: r.received_at, seq: r.seq, sha256: r.sha256 }),
    );
    const lone_surrogate = (text: string) => text.includes("\\ud");
    if (!lone_surrogate(head) && !lone_surrogate(tail) && !listed.some(lone_surrogate)) return jsonListBytes(head, listed, tail);
  }
  return Buffer.from(context + canonicalJson(signed), "utf8");
}

/**
 * The UTF-8 bytes of `head`, the `items` joined by commas, and `tail`, written into one buffer
 * piece by piece. Joining them first would make one string of a whole receipt (~130 KB), and a
 * string above 128 KiB goes to V8's large-object space, which costs more than all the writing.
 */
export function jsonListBytes(head: string, items: readonly string[], tail: string): Buffer {
  let length = Buffer.byteLength(head, "utf8") + Buffer.byteLength(tail, "utf8") + Math.max(0, items.length - 1);
  for (const item of items) length += Buffer.byteLength(item, "utf8");
  const bytes = Buffer.allocUnsafe(length);
  let at = bytes.write(head, 0, "utf8");
  items.forEach((item, i) => {
    if (i > 0) bytes[at++] = 0x2c; // ","
    at += bytes.write(item, at, "utf8");
  });
  bytes.write(tail, at, "utf8");
  return bytes;
}

/** One signature for the whole delivery, so ingesting 500 records costs one Ed25519 signing; always v2. */
export function signDeliveryReceipt(signer: NoteSigner, fields: DeliveryReceiptFields, identity: LogIdentity): DeliveryReceipt {
  if (fields.records.length > records_per_delivery_max) {
    throw new RangeError(`a delivery receipt lists at most ${records_per_delivery_max} records`);
  }
  if (!isHexSha256(identity.log)) throw new TypeError("a receipt's log is the hex leaf hash of the log's entry 0");
  const records = fields.records.map((r) => ({
    event_id: r.event_id,
    seq: r.seq,
    leaf_hash: r.leaf_hash,
    sha256: r.sha256,
    occurred_at: r.occurred_at,
    received_at: r.received_at,
  }));
  const signed = { source: fields.source, received_at: fields.received_at, records };
  const signature = sign(null, deliveryMessage(signed, identity), signer.privateKey).toString("base64");
  return { ...signed, log: identity.log, key_id: keyIdHex(signer.keyId), signature };
}

/**
 * Checks a delivery receipt's signature: a v2 receipt (one that carries `log`) as one of the log
 * of `origin` (by default the key's name) and of its own `log`, a v1 receipt under the key alone.
 */
export function verifyDeliveryReceipt(receipt: DeliveryReceipt, verifier: NoteVerifier, origin: string = verifier.name): ProofCheck {
  // Read from a file it is untrusted JSON: the fields read here must have their types first.
  const { source, received_at, records, log, key_id, signature: signatureText } = (typeof receipt === "object" && receipt !== null ? receipt : {}) as Partial<DeliveryReceipt>;
  if (typeof source !== "string" || typeof received_at !== "string" || !Array.isArray(records) || typeof key_id !== "string" || typeof signatureText !== "string") {
    return { ok: false, reason: "not a delivery receipt (source, received_at, records, key_id and signature are required)" };
  }
  if (log !== undefined && !isHexSha256(log)) return { ok: false, reason: "not a delivery receipt (its log is not a hex leaf hash)" };
  if (key_id !== keyIdHex(verifier.keyId)) return { ok: false, reason: `receipt signed by key ${jsonPreview(key_id)}, not ${keyIdHex(verifier.keyId)}` };
  const signature = decodeBase64Strict(signatureText);
  const identity = log === undefined ? undefined : { origin, log };
  let message: Buffer;
  try {
    message = deliveryMessage(receipt, identity);
  } catch (error) {
    // What canonical JSON cannot write (1e400, a lone surrogate) was never signed.
    if (error instanceof CanonicalJsonError) return { ok: false, reason: `not a delivery receipt (${error.message})` };
    throw error;
  }
  const good = signature !== undefined && signature.length === 64 && verify(null, message, verifier.publicKey, signature);
  if (good) return { ok: true };
  return { ok: false, reason: identity ? `delivery receipt signature does not verify as one of origin ${JSON.stringify(origin)}` : "delivery receipt signature does not verify" };
}
