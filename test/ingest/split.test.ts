// Splitting a delivery: a body of several lines is split as NDJSON without parsing it whole
// first, and still comes out as the rule says: one JSON object (even across lines) is one
// record, anything else is NDJSON. A property test holds it to the rule written plainly.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/evidence/index.js";
import { isUtf8 } from "node:buffer";
import { invalidUtf8Offset, records_per_delivery_max, splitDelivery, type SplitDelivery } from "../../src/ingest/delivery.js";

/** Without JSON whitespace at either end. */
const trimmed = (text: string) => text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, "");

/** The rule as written: parse the whole trimmed body; one object is one record; otherwise NDJSON lines. */
function byTheRule(raw: Buffer): SplitDelivery {
  const text = raw.toString("utf8");
  const body = trimmed(text);
  try {
    const value = JSON.parse(body) as unknown;
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      return { form: "object", records: [{ index: 0, value, sha256: sha256Hex(Buffer.from(body)) }] };
    }
  } catch {
    // not one JSON value: NDJSON
  }
  const lines = text
    .split("\n")
    .map(trimmed)
    .filter((line) => line !== "");
  const records = lines.map((line, index) => {
    const sha256 = sha256Hex(Buffer.from(line));
    try {
      return { index, value: JSON.parse(line) as unknown, sha256 };
    } catch (error) {
      return { index, value: undefined, sha256, syntax_error: (error as Error).message };
    }
  });
  return { form: "ndjson", records };
}

describe("splitDelivery", () => {
  it("splits every body as the rule says: one object whole, anything else by lines", () => {
    const object = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
    const line = fc.oneof(
      { weight: 4, arbitrary: object.map((value) => JSON.stringify(value)) },
      object.map((value) => JSON.stringify(value, null, 2)), // one object across lines
      fc.jsonValue({ maxDepth: 1 }).map((value) => JSON.stringify(value)),
      fc.constantFrom("{", "}", '{"a":', "not json", "", "  ", "\t"),
    );
    const body = fc
      .tuple(fc.array(line, { minLength: 1, maxLength: 8 }), fc.constantFrom("\n", "\r\n"), fc.constantFrom("", " ", "\n", "\r\n\n"))
      .map(([lines, ending, around]) => `${around}${lines.join(ending)}${around}`)
      .filter((text) => text.trim() !== "" && !text.trim().startsWith("["));
    fc.assert(
      fc.property(body, (text) => {
        const raw = Buffer.from(text);
        expect(splitDelivery(raw)).toEqual(byTheRule(raw));
      }),
      { numRuns: 2_000 },
    );
  });

  it("takes a pretty-printed object of more lines than a delivery's records as one record, and refuses that many NDJSON lines", () => {
    const keys = Object.fromEntries(Array.from({ length: records_per_delivery_max + 10 }, (_, i) => [`k${i}`, i]));
    const pretty = JSON.stringify(keys, null, 2);
    const split = splitDelivery(Buffer.from(pretty));
    expect(split.form).toBe("object");
    expect(split.records).toHaveLength(1);
    const lines = Array.from({ length: records_per_delivery_max + 1 }, (_, i) => JSON.stringify({ i })).join("\n");
    expect(() => splitDelivery(Buffer.from(lines))).toThrow(/at most 500 records/);
  });
});

describe("invalidUtf8Offset", () => {
  it("finds no bad byte exactly when the bytes are UTF-8, and otherwise the start of the first bad sequence", () => {
    // Mostly well-formed text with a few arbitrary bytes spliced in, so bad sequences sit among good ones.
    const piece = fc.oneof(
      fc.string({ unit: "grapheme", maxLength: 6 }).map((text) => Buffer.from(text)),
      fc.uint8Array({ minLength: 1, maxLength: 4 }).map((bytes) => Buffer.from(bytes)),
      fc.constantFrom(Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xc0, 0xaf]), Buffer.from([0xf4, 0x90, 0x80, 0x80]), Buffer.from([0xe2, 0x82])),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const bytes = Buffer.concat(pieces);
        const offset = invalidUtf8Offset(bytes);
        expect(offset === -1, bytes.toString("hex")).toBe(isUtf8(bytes));
        if (offset === -1) return;
        // Everything before it is UTF-8, and no well-formed sequence of 1 to 4 bytes starts there.
        expect(isUtf8(bytes.subarray(0, offset))).toBe(true);
        for (let length = 1; length <= 4; length++) expect(isUtf8(bytes.subarray(offset, offset + length))).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });
});
