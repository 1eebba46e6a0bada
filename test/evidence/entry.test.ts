// Entries and receipts: the hand-assembled entry text is exactly RFC 8785 of the entry,
// and entry receipts and delivery receipts verify and refuse tampering.

import { sign } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/evidence/canonical.js";
import { buildEntry } from "../../src/evidence/entry.js";
import { scrub } from "../../src/evidence/scrub.js";
import { leafHash } from "../../src/evidence/merkle.js";
import { parseVerifierKey } from "../../src/evidence/note.js";
import { signDeliveryReceipt, signReceiptFields, verifyDeliveryReceipt, verifyReceipt } from "../../src/evidence/receipt.js";
import { newSigner, test_origin } from "./support.js";

describe("buildEntry", () => {
  it("produces the canonical JSON of the entry for arbitrary bodies, with and without secrets", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue()),
        fc.option(fc.constantFrom("2026-01-01T00:00:00Z", "2026-01-01T05:30:00.123+05:30"), { nil: undefined }),
        fc.boolean(),
        fc.nat(),
        (body, occurred_at, withSecret, seq) => {
          const input = { kind: "observer.call", source: "src ✓", body: withSecret ? { ...body, api_key: "s3cret" } : body, occurred_at };
          const built = buildEntry(input, seq, "2026-01-02T00:00:00.000Z");
          expect(built.text).toBe(canonicalJson(JSON.parse(built.text)));
          expect(built.text).toBe(canonicalJson(built.entry));
          expect(built.leafHash.equals(leafHash(built.text))).toBe(true);
          // Of the body as stored: never of a secret scrubbing hid.
          expect(built.entry.body_sha256).toBe(sha256Hex(canonicalJson(built.entry.body)));
          expect(built.entry.body_sha256).toBe(sha256Hex(canonicalJson(scrub(input.body))));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("receipts", () => {
  const signer = newSigner();
  const verifier = parseVerifierKey(signer.verifierKey);
  const fields = { seq: 5, leaf_hash: "ab".repeat(32), kind: "gate.decision", at: "2026-01-01T00:00:00.000Z" };
  const identity = { origin: test_origin, log: "0f".repeat(32) };
  const other_log = "f0".repeat(32);

  it("an entry receipt verifies, and fails when any field changes or another key checks it", () => {
    const receipt = signReceiptFields(signer, fields, identity);
    expect(receipt.key_id).toBe(signer.keyIdHex);
    expect(receipt.log).toBe(identity.log);
    expect(verifyReceipt(receipt, verifier).ok).toBe(true);
    // A lone surrogate (an export line may carry one) is a malformed receipt, not a throw.
    for (const changed of [{ seq: 6 }, { leaf_hash: "cd".repeat(32) }, { kind: "gate.settlement" }, { at: "2026-01-01T00:00:01.000Z" }, { kind: "\ud800" }, { at: "x\udc00" }]) {
      expect(verifyReceipt({ ...receipt, ...changed }, verifier).ok).toBe(false);
    }
    expect(verifyReceipt(receipt, parseVerifierKey(newSigner().verifierKey)).ok).toBe(false);
  });

  it("a v2 entry receipt is signed as its log's: another origin, another log id, or its log stripped fails", () => {
    const receipt = signReceiptFields(signer, fields, identity);
    expect(verifyReceipt(receipt, verifier, test_origin)).toEqual({ ok: true });
    // Staging and prod sharing one key: the origin is signed though not carried.
    expect(verifyReceipt(receipt, verifier, "prod.example/log")).toEqual({ ok: false, reason: 'receipt signature does not verify as one of origin "prod.example/log"' });
    // A reset store under the same origin starts another log: its entry 0 differs.
    expect(verifyReceipt({ ...receipt, log: other_log }, verifier).ok).toBe(false);
    expect(verifyReceipt({ ...receipt, log: "not hex" }, verifier)).toMatchObject({ ok: false, reason: expect.stringMatching(/malformed/) });
    // Stripped of its log it is no v1 receipt: the two messages have different contexts.
    const { log: _log, ...stripped } = receipt;
    expect(verifyReceipt(stripped, verifier).ok).toBe(false);
  });

  it("a v1 entry receipt, signed before receipts named their log, still verifies under the key, and cannot be given a log", () => {
    const message = Buffer.from(`bursar/receipt/v1\n${canonicalJson(fields)}`, "utf8");
    const v1 = { ...fields, key_id: signer.keyIdHex, signature: sign(null, message, signer.privateKey).toString("base64") };
    expect(verifyReceipt(v1, verifier)).toEqual({ ok: true });
    expect(verifyReceipt({ ...v1, seq: 6 }, verifier).ok).toBe(false);
    expect(verifyReceipt({ ...v1, log: identity.log }, verifier).ok).toBe(false);
  });

  it("a delivery receipt carries one signature over every record", () => {
    const records = [0, 1, 2].map((i) => ({
      event_id: `evt_${i}`,
      seq: 10 + i,
      leaf_hash: leafHash(`r${i}`).toString("hex"),
      sha256: sha256Hex(`raw ${i}`),
      occurred_at: "2026-01-01T00:00:00Z",
      received_at: "2026-01-01T00:00:01.000Z",
    }));
    const receipt = signDeliveryReceipt(signer, { source: "src_1", received_at: "2026-01-01T00:00:01.000Z", records }, identity);
    expect(Object.keys(receipt)).toEqual(["source", "received_at", "records", "log", "key_id", "signature"]);
    expect(verifyDeliveryReceipt(receipt, verifier)).toEqual({ ok: true });
    const altered = { ...receipt, records: receipt.records.map((r, i) => (i === 1 ? { ...r, seq: 99 } : r)) };
    expect(verifyDeliveryReceipt(altered, verifier).ok).toBe(false);
    // A receipt read from untrusted JSON that lacks a field or has a sparse list fails to verify; it does not throw.
    const { source: _source, ...unsourced } = receipt;
    expect(verifyDeliveryReceipt(unsourced as typeof receipt, verifier).ok).toBe(false);
    expect(verifyDeliveryReceipt({ ...receipt, records: [, ...receipt.records.slice(1)] as typeof receipt.records }, verifier).ok).toBe(false);
    expect(() => signDeliveryReceipt(signer, { source: "s", received_at: "t", records: Array.from({ length: 501 }, () => records[0]!) }, identity)).toThrow(/500/);

    // v2 names its log: another origin, another log id, or the log stripped fails.
    expect(verifyDeliveryReceipt(receipt, verifier, "prod.example/log")).toEqual({ ok: false, reason: 'delivery receipt signature does not verify as one of origin "prod.example/log"' });
    expect(verifyDeliveryReceipt({ ...receipt, log: other_log }, verifier).ok).toBe(false);
    const { log: _log, ...stripped } = receipt;
    expect(verifyDeliveryReceipt(stripped, verifier).ok).toBe(false);

    // A v1 delivery receipt (stored before receipts named their log) still verifies under the key.
    const v1Fields = { source: "src_1", received_at: "2026-01-01T00:00:01.000Z", records };
    const v1Message = Buffer.from(`bursar/delivery-receipt/v1\n${canonicalJson(v1Fields)}`, "utf8");
    const v1 = { ...v1Fields, key_id: signer.keyIdHex, signature: sign(null, v1Message, signer.privateKey).toString("base64") };
    expect(verifyDeliveryReceipt(v1, verifier)).toEqual({ ok: true });
    expect(verifyDeliveryReceipt({ ...v1, log: identity.log }, verifier).ok).toBe(false);
  });
});
