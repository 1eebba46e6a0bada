// The written-out record check is sufficient for the zod schema: whatever it accepts, the schema
// accepts too (so it can only skip work, never let a bad record in), and it does accept the
// ordinary records, so deliveries take the fast path.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decision_record_schema, surelyValidRecord } from "../../src/ingest/schema.js";

const valid = {
  schema: "bursar.gateway-decision/1",
  event_id: "evt_1",
  occurred_at: "2026-10-09T14:03:11.123+05:30",
  decision: "approve",
  tool: "github/create_release",
  server: "github-mcp",
  args: { repo: "acme/api", nested: { list: [1, "two", null] } },
  agent: { id: "agent-release-bot", type: "agent" },
  on_behalf_of: { email: "a@example.com", name: "A", type: "human" },
  approver: { id: "u_9", type: "human" },
  policy: { id: "pol_12", name: "releases need a human", version: "3" },
  reason: "",
  correlation_id: "corr-1",
};

/** Values a field might be replaced with: good ones, wrong types, edge lengths, bad times. */
const replacement = fc.oneof(
  fc.constantFrom(
    undefined,
    null,
    "",
    "x",
    "x".repeat(256),
    "x".repeat(257),
    "e".repeat(200),
    "e".repeat(201),
    "evt\u0000nul",
    "evt\nline",
    "r".repeat(4097),
    "0".repeat(64),
    "A".repeat(64),
    "2026-02-29T00:00:00Z",
    "2028-02-29T00:00:00Z",
    "2026-10-09T14:03:11.1234567891Z",
    "2026-10-09T24:00:00Z",
    "2026-10-09 14:03:11Z",
    "interlok.gateway-decision/1",
    "deny",
    "human",
    "robot",
    [],
    [1],
    new Date(0),
    Object.create(null) as object,
    { constructor: () => 1 },
    { constructor: "a string is fine" },
    { [Symbol("key")]: 1 },
  ),
  fc.string({ maxLength: 10 }),
  fc.integer(),
  fc.dictionary(fc.constantFrom("id", "email", "name", "type", "version", "idd", "__proto__"), fc.oneof(fc.constantFrom("agent", "human", "", "x"), fc.integer()), { maxKeys: 4 }),
);

const field = fc.constantFrom(...Object.keys(valid), "args", "args", "args_hash", "extra", "__proto__");
const nested = fc.constantFrom("agent", "on_behalf_of", "approver", "policy");
const sub_field = fc.constantFrom("id", "email", "name", "type", "version", "idd");

const mutated = fc
  .tuple(
    fc.array(fc.tuple(field, replacement), { maxLength: 3 }),
    fc.array(fc.tuple(nested, sub_field, replacement), { maxLength: 2 }),
    fc.boolean(),
  )
  .map(([top, inner, drop_args]) => {
    const record = JSON.parse(JSON.stringify(valid)) as Record<string, unknown>;
    if (drop_args) {
      delete record.args;
      record.args_hash = "a".repeat(64);
    }
    for (const [key, value] of top) Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
    for (const [key, sub, value] of inner) {
      const target = record[key];
      if (target !== null && typeof target === "object") Object.defineProperty(target, sub, { value, enumerable: true, writable: true, configurable: true });
    }
    return record;
  });

describe("surelyValidRecord", () => {
  it("accepts only records the zod schema accepts", () => {
    let fast = 0;
    fc.assert(
      fc.property(mutated, (record) => {
        if (!surelyValidRecord(record)) return;
        fast++;
        expect(decision_record_schema.safeParse(record).success).toBe(true);
      }),
      { numRuns: 5_000 },
    );
    expect(fast).toBeGreaterThan(100);
  });

  it("takes the fast path for ordinary records, with args or with args_hash", () => {
    const { args: _args, ...hashed } = valid;
    for (const record of [valid, { ...hashed, args_hash: "b".repeat(64) }, { ...valid, schema: "interlok.gateway-decision/1" }]) {
      expect(decision_record_schema.safeParse(record).success).toBe(true);
      expect(surelyValidRecord(record)).toBe(true);
    }
  });
});
