// Signed receipts, issued at append time before any checkpoint: one per entry over
// {seq, leaf_hash, kind, at}, and one per ingest delivery listing every record.

import { sign, verify } from "node:crypto";
import { CanonicalJsonError, canonicalJson, hasLoneSurrogate, isHexSha256 } from "./canonical.js";
import type { ProofCheck } from "./merkle.js";
import { keyIdHex, type NoteSigner, type NoteVerifier } from "./note.js";

/** Domain-separation prefixes: a receipt signature can never be replayed as a note or the other receipt. */
export const receipt_context = "bursar/receipt/v1\n";
export const delivery_receipt_context = "bursar/delivery-receipt/v1\n";
/** DESIGN: a delivery holds at most 500 records. */
export const records_per_delivery_max = 500;

export interface ReceiptFields {
  seq: number;
  /** Hex RFC 6962 leaf hash of the entry. */
  leaf_hash: string;
  kind: string;
  /** The entry's received_at. */
  at: string;
}

export interface Receipt extends ReceiptFields {
  /** Hex key id of the log key that signed it. */
  key_id: string;
  /** Base64 Ed25519 signature over receipt_context + canonical JSON of the four fields. */
  signature: string;
}

function receiptMessage(fields: ReceiptFields): Buffer {
  const { seq, leaf_hash, kind, at } = fields;
  return Buffer.from(receipt_context + canonicalJson({ seq, leaf_hash, kind, at }), "utf8");
}

export function signReceiptFields(signer: NoteSigner, fields: ReceiptFields): Receipt {
  const signature = sign(null, receiptMessage(fields), signer.privateKey).toString("base64");
  return { seq: fields.seq, leaf_hash: fields.leaf_hash, kind: fields.kind, at: fields.at, key_id: keyIdHex(signer.keyId), signature };
}

export function verifyReceipt(receipt: Receipt, verifier: NoteVerifier): ProofCheck {
  if (receipt.key_id !== keyIdHex(verifier.keyId)) return { ok: false, reason: `receipt signed by key ${receipt.key_id}, not ${keyIdHex(verifier.keyId)}` };
  // A receipt read from an export is untrusted JSON: every signed field must have its type.
  const { seq, leaf_hash, kind, at, signature: signatureText } = receipt;
  if (!Number.isSafeInteger(seq) || !isHexSha256(leaf_hash) || typeof kind !== "string" || typeof at !== "string" || typeof signatureText !== "string") {
    return { ok: false, reason: "malformed receipt" };
  }
  // Nothing signed has a lone surrogate (canonical JSON cannot write one): such a receipt is forged.
  if (hasLoneSurrogate(kind) || hasLoneSurrogate(at)) return { ok: false, reason: "malformed receipt" };
  const signature = Buffer.from(signatureText, "base64");
  const good = signature.length === 64 && verify(null, receiptMessage(receipt), verifier.publicKey, signature);
  return good ? { ok: true } : { ok: false, reason: "receipt signature does not verify" };
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
  key_id: string;
  /** Base64 Ed25519 signature over delivery_receipt_context + canonical JSON of the fields. */
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
 * The signed bytes: the context, then canonical JSON of {source, received_at, records}. A
 * receipt as signing makes it (500 records are listed per delivery) is written by
 * JSON.stringify with its keys in RFC 8785 order, which for such fields is RFC 8785 except
 * for a lone surrogate: JSON.stringify escapes one as `\udXXX`, where RFC 8785 refuses it.
 * Any `\ud` in the text (also the text of an escaped backslash before "ud") therefore sends
 * the fields down canonicalJson, as does anything else, such as a receipt read from untrusted
 * JSON. A property test holds the two side by side.
 */
export function deliveryMessage(fields: DeliveryReceiptFields): Buffer {
  const { source, received_at, records } = fields;
  if (typeof source === "string" && typeof received_at === "string" && isPlainRecordList(records)) {
    const head = `${delivery_receipt_context}{"received_at":${JSON.stringify(received_at)},"records":[`;
    const tail = `],"source":${JSON.stringify(source)}}`;
    const listed = records.map((r) =>
      JSON.stringify({ event_id: r.event_id, leaf_hash: r.leaf_hash, occurred_at: r.occurred_at, received_at: r.received_at, seq: r.seq, sha256: r.sha256 }),
    );
    const lone_surrogate = (text: string) => text.includes("\\ud");
    if (!lone_surrogate(head) && !lone_surrogate(tail) && !listed.some(lone_surrogate)) return jsonListBytes(head, listed, tail);
  }
  return Buffer.from(delivery_receipt_context + canonicalJson({ source, received_at, records }), "utf8");
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

/** One signature for the whole delivery, so ingesting 500 records costs one Ed25519 signing. */
export function signDeliveryReceipt(signer: NoteSigner, fields: DeliveryReceiptFields): DeliveryReceipt {
  if (fields.records.length > records_per_delivery_max) {
    throw new RangeError(`a delivery receipt lists at most ${records_per_delivery_max} records`);
  }
  const records = fields.records.map((r) => ({
    event_id: r.event_id,
    seq: r.seq,
    leaf_hash: r.leaf_hash,
    sha256: r.sha256,
    occurred_at: r.occurred_at,
    received_at: r.received_at,
  }));
  const signed = { source: fields.source, received_at: fields.received_at, records };
  const signature = sign(null, deliveryMessage(signed), signer.privateKey).toString("base64");
  return { ...signed, key_id: keyIdHex(signer.keyId), signature };
}

export function verifyDeliveryReceipt(receipt: DeliveryReceipt, verifier: NoteVerifier): ProofCheck {
  // Read from a file it is untrusted JSON: the fields read here must have their types first.
  const { source, received_at, records, key_id, signature: signatureText } = (typeof receipt === "object" && receipt !== null ? receipt : {}) as Partial<DeliveryReceipt>;
  if (typeof source !== "string" || typeof received_at !== "string" || !Array.isArray(records) || typeof key_id !== "string" || typeof signatureText !== "string") {
    return { ok: false, reason: "not a delivery receipt (source, received_at, records, key_id and signature are required)" };
  }
  if (key_id !== keyIdHex(verifier.keyId)) return { ok: false, reason: `receipt signed by key ${JSON.stringify(key_id)}, not ${keyIdHex(verifier.keyId)}` };
  const signature = Buffer.from(signatureText, "base64");
  let message: Buffer;
  try {
    message = deliveryMessage(receipt);
  } catch (error) {
    // What canonical JSON cannot write (1e400, a lone surrogate) was never signed.
    if (error instanceof CanonicalJsonError) return { ok: false, reason: `not a delivery receipt (${error.message})` };
    throw error;
  }
  const good = signature.length === 64 && verify(null, message, verifier.publicKey, signature);
  return good ? { ok: true } : { ok: false, reason: "delivery receipt signature does not verify" };
}
