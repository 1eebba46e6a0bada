// An ingest answer is sent as bytes written record by record: they must be exactly the bytes
// of JSON.stringify(answer), whatever the strings hold.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonListBytes } from "../../src/evidence/index.js";
import { answerBytes, type IngestAnswer } from "../../src/ingest/ingest.js";

describe("answerBytes", () => {
  it("is JSON.stringify(answer) in UTF-8, for any strings and any number of records", () => {
    const text = fc.string({ unit: "binary", maxLength: 10 });
    const listed = fc.record({ event_id: text, seq: fc.nat(), leaf_hash: text, sha256: text, occurred_at: text, received_at: text });
    const answer = fc.record({
      source: text,
      records: fc.nat(),
      written: fc.nat(),
      duplicates: fc.nat(),
      delivery_id: fc.option(text, { nil: null }),
      // v2 receipts carry `log`; a v1 receipt stored before them is returned without it.
      receipt: fc.record(
        { source: text, received_at: text, records: fc.array(listed, { maxLength: 6 }), log: text, key_id: text, signature: text },
        { requiredKeys: ["source", "received_at", "records", "key_id", "signature"] },
      ),
    });
    fc.assert(
      fc.property(answer, (value) => {
        expect(answerBytes(value as IngestAnswer).toString("utf8")).toBe(JSON.stringify(value));
      }),
      { numRuns: 1_000 },
    );
  });

  it("writes head, items and tail of any size, multi-byte characters included", () => {
    const items = Array.from({ length: 600 }, (_, i) => JSON.stringify({ i, text: `é€😀 ${"x".repeat(i % 300)}` }));
    expect(jsonListBytes("[", items, "]").toString("utf8")).toBe(`[${items.join(",")}]`);
    expect(jsonListBytes("{}", [], "").toString("utf8")).toBe("{}");
  });
});
