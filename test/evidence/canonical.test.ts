// canonicalJson is RFC 8785: byte-identical to the npm `canonicalize` package (the reference
// implementation DESIGN.md names) on random JSON values, and it refuses what JSON cannot carry.

import { createHash } from "node:crypto";
import fc from "fast-check";
import canonicalize from "canonicalize";
import { describe, expect, it } from "vitest";
import { canonicalJson, CanonicalJsonError, nested_too_deep, not_a_finite_number, representable, sha256, sha256Hex } from "../../src/evidence/canonical.js";
import { delivery_receipt_context_v1, delivery_receipt_context_v2, deliveryMessage, type DeliveryRecord } from "../../src/evidence/receipt.js";

describe("canonicalJson", () => {
  it("matches the npm canonicalize package on random JSON values", () => {
    const value = fc.jsonValue({ maxDepth: 5, stringUnit: "binary" });
    const outcome = (render: (input: unknown) => string | undefined, input: unknown): string => {
      try {
        return `ok ${render(input)}`;
      } catch {
        // Lone surrogates (from "binary" strings) are refused by both.
        return "refused";
      }
    };
    fc.assert(
      fc.property(value, (input) => outcome(canonicalJson, input) === outcome(canonicalize, input)),
      { numRuns: 2_000 },
    );
  });

  it("matches on wide objects, long and escaped strings and repeated keys (the sort, loop and quoted-key fast paths)", () => {
    // Characters that need escaping or a surrogate check, mixed with plain ones, in keys and values of any length.
    const unit = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(..."abcXYZ09 _-./:") }, fc.constantFrom('"', "\\", "\n", "\u0000", "\u001f", "\u007f", "\u2028", "é", "€", "\ud83d\ude00", "\ud800", "\udc00"));
    const text = fc.oneof(fc.string({ unit, maxLength: 8 }), fc.string({ unit, minLength: 60, maxLength: 70 }), fc.string({ unit, minLength: 100, maxLength: 400 }));
    const wide = fc.dictionary(text, fc.oneof(text, fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(text, { maxLength: 3 })), { maxKeys: 40 });
    const value = fc.oneof(wide, fc.array(wide, { maxLength: 4 }), fc.record({ nested: wide, list: fc.array(wide, { maxLength: 3 }) }));
    const outcome = (render: (input: unknown) => string | undefined, input: unknown): string => {
      try {
        return `ok ${render(input)}`;
      } catch {
        return "refused";
      }
    };
    // Twice over the same values: the second pass takes the quoted-key cache the first one filled.
    const values = fc.sample(value, 1_500);
    for (let pass = 0; pass < 2; pass++) {
      for (const input of values) expect(outcome(canonicalJson, input)).toBe(outcome(canonicalize, input));
    }
  });

  it("hashes with the one-shot SHA-256 exactly as a streaming hash does, strings as UTF-8", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "grapheme" }), fc.uint8Array({ maxLength: 2_000 })), (data) => {
        const expected = createHash("sha256").update(data).digest();
        return sha256Hex(data) === expected.toString("hex") && sha256(data).equals(expected);
      }),
      { numRuns: 500 },
    );
  });

  it("matches on the RFC 8785 number and ordering examples", () => {
    const sample = { numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000001, 1e-7, -0, 9007199254740991], "\u20ac": 1, "\r": 2, "\ud83d\ude00": 3, "1": 4, a: [null, true, false] };
    expect(canonicalJson(sample)).toBe(canonicalize(sample));
    expect(canonicalJson({ b: 1, a: undefined, c: [undefined] })).toBe('{"b":1,"c":[null]}');
  });

  it("refuses NaN, infinities, lone surrogates, bigints and undefined", () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, "\ud800", { k: "x\udc00" }, 1n, undefined]) {
      expect(() => canonicalJson(bad)).toThrow(CanonicalJsonError);
    }
  });
});

describe("deliveryMessage", () => {
  it("is the context plus canonicalJson of {source, received_at, records} (v1), or of {origin, log, source, received_at, records} (v2), whatever they hold", () => {
    const text = fc.string({ unit: "binary", maxLength: 12 });
    const plain = fc.record({ event_id: text, leaf_hash: text, occurred_at: text, received_at: text, seq: fc.integer({ min: 0 }), sha256: text });
    const odd = fc.oneof(plain.map((record) => ({ ...record, extra: 1 })), plain.map((record) => ({ ...record, seq: String(record.seq) })), fc.jsonValue());
    const records = fc.oneof(
      { weight: 4, arbitrary: fc.array(fc.oneof({ weight: 4, arbitrary: plain }, odd), { maxLength: 5 }) },
      fc.sparseArray(plain, { maxLength: 4 }),
      fc.array(plain, { maxLength: 2 }).map((list) => Object.assign(list, { toJSON: () => "listed" })),
      plain.map((record) => [Object.assign(Object.create({ inherited: 1 }) as object, record)]),
      fc.jsonValue(),
    );
    // Receipts read from JSON may lack any field, or carry it with another type.
    const fields = fc.record({ source: fc.oneof(text, fc.jsonValue()), received_at: fc.oneof(text, fc.jsonValue()), records }, { requiredKeys: [] });
    // v2: the log's origin and id, as signing passes them (strings) or as a receipt read from JSON may carry its log.
    const identity = fc.option(fc.record({ origin: text, log: fc.oneof(text, fc.jsonValue()) }), { nil: undefined });
    const outcome = (run: () => string) => {
      try {
        return run();
      } catch (error) {
        return (error as Error).name;
      }
    };
    fc.assert(
      fc.property(fields, identity, (input, named) => {
        const { source, received_at, records: listed } = input as Record<string, unknown>;
        const expected = outcome(() =>
          named === undefined
            ? delivery_receipt_context_v1 + canonicalJson({ source, received_at, records: listed })
            : delivery_receipt_context_v2 + canonicalJson({ origin: named.origin, log: named.log, source, received_at, records: listed }),
        );
        const given = input as { source: string; received_at: string; records: DeliveryRecord[] };
        expect(outcome(() => deliveryMessage(given, named as { origin: string; log: string } | undefined).toString("utf8"))).toBe(expected);
      }),
      { numRuns: 1_000 },
    );
  });

  it("agrees with canonicalJson where JSON.stringify and RFC 8785 part ways", () => {
    const record = { event_id: "e", leaf_hash: "a".repeat(64), occurred_at: "t", received_at: "t", seq: 1, sha256: "b".repeat(64) };
    const twins = [
      { ...record, event_id: "lone \ud800 surrogate" }, // RFC 8785 refuses it; JSON.stringify escapes it
      { ...record, event_id: "pair \ud83d\ude00" },
      { ...record, event_id: "\\ud800 is text here" }, // the text JSON.stringify writes for a backslash before "ud"
      { ...record, seq: -0 },
      { ...record, seq: Number.NaN },
      { ...record, seq: Number.POSITIVE_INFINITY },
      { ...record, seq: 2 ** 60 },
    ];
    const identities = [undefined, { origin: "o", log: "c".repeat(64) }, { origin: "lone \udc00 origin", log: "c".repeat(64) }];
    for (const twin of twins) {
      for (const identity of identities) {
        const fields = { source: "src_1", received_at: "t", records: [twin] };
        let expected: string;
        try {
          expected = identity === undefined ? delivery_receipt_context_v1 + canonicalJson(fields) : delivery_receipt_context_v2 + canonicalJson({ ...identity, ...fields });
        } catch (error) {
          expect(() => deliveryMessage(fields, identity)).toThrow((error as Error).constructor as ErrorConstructor);
          continue;
        }
        expect(deliveryMessage(fields, identity).toString("utf8")).toBe(expected);
      }
    }
  });
});

describe("representable", () => {
  it("replaces what RFC 8785 cannot write and returns anything else untouched", () => {
    const clean = { amount: 5000, notes: { a: "b" }, list: [1, "x", null, true] };
    expect(representable(clean)).toBe(clean);
    const parsed = JSON.parse('{"amount": 1e400, "low": -1e400, "notes": {"\\udc00": "x\\ud800y"}, "ok": [1, 2]}') as Record<string, unknown>;
    const fixed = representable(parsed) as Record<string, unknown>;
    expect(fixed).toEqual({ amount: not_a_finite_number, low: not_a_finite_number, notes: { "\uFFFD": "x\uFFFDy" }, ok: [1, 2] });
    expect(fixed.ok).toBe(parsed.ok);
    expect(() => canonicalJson(fixed)).not.toThrow();
    const deep = JSON.parse(`{"a": ${"[".repeat(400)}${"]".repeat(400)}}`) as unknown;
    expect(canonicalJson(representable(deep))).toContain(nested_too_deep);
    const own = JSON.parse('{"__proto__": {"n": 1e400}}') as Record<string, unknown>;
    const copy = representable(own) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(canonicalJson(copy)).toBe(`{"__proto__":{"n":"${not_a_finite_number}"}}`);
  });
});

