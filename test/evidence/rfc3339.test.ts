// isRfc3339 takes only times that exist. V8's Date.parse shifts impossible calendar fields
// instead of refusing them ("2027-02-30" is 2027-03-02, "24:00:00" the next midnight), so a block
// could expire on another day than the operator wrote, and a log entry carry another time than
// its writer sent. The published occurred_at pattern (zod's) refuses them too: both agree.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildEntry, EvidenceInputError, isRfc3339, rfc3339Problem } from "../../src/evidence/entry.js";
import { decision_record_schema } from "../../src/ingest/schema.js";
import { testLedger } from "../support/ledger.js";

const valid = [
  "2026-10-09T14:03:11Z",
  "2026-10-09T14:03:11.123456789+05:30",
  "2026-10-09T14:03:11-00:00",
  "2026-12-31T23:59:59Z",
  "2026-01-31T00:00:00Z",
  "2026-04-30T00:00:00Z",
  "2026-02-28T00:00:00Z",
  "2024-02-29T00:00:00Z", // divisible by 4
  "2000-02-29T00:00:00Z", // divisible by 400
  "0000-02-29T00:00:00Z", // proleptic Gregorian: year 0 is a leap year
  "2026-10-09T00:00:00+23:59",
  "2026-10-09T00:00:00-23:59",
];

const invalid = [
  ["2027-02-30T00:00:00Z", "February 30 (Date.parse: March 2)"],
  ["2026-02-29T00:00:00Z", "February 29 of a common year"],
  ["2100-02-29T00:00:00Z", "February 29 of a century not divisible by 400"],
  ["2026-04-31T00:00:00Z", "April 31"],
  ["2026-06-31T00:00:00Z", "June 31"],
  ["2026-09-31T00:00:00Z", "September 31"],
  ["2026-11-31T00:00:00Z", "November 31"],
  ["2026-01-32T00:00:00Z", "January 32"],
  ["2026-01-00T00:00:00Z", "day 0"],
  ["2026-00-10T00:00:00Z", "month 0"],
  ["2026-13-01T00:00:00Z", "month 13"],
  ["2026-12-31T24:00:00Z", "hour 24 (Date.parse: the next midnight)"],
  ["2026-12-31T24:00:00.000Z", "hour 24 with a fraction"],
  ["2026-12-31T23:60:00Z", "minute 60"],
  ["2026-12-31T23:59:60Z", "a leap second (the docs: seconds 00–59)"],
  ["2026-10-09T00:00:00+24:00", "offset hour 24"],
  ["2026-10-09T00:00:00+05:60", "offset minute 60"],
  ["2026-10-09T14:03:11.1234567890Z", "10 fraction digits"],
  ["2026-10-09t14:03:11z", "lower-case t and z"],
  ["2026-10-09 14:03:11Z", "a space for T"],
  ["2026-10-09T14:03Z", "no seconds"],
  ["2026-10-09T14:03:11+0530", "an offset without its colon"],
  ["2026-10-09T14:03:11", "no zone"],
  ["+02026-10-09T14:03:11Z", "an expanded year"],
] as const;

/** Whether a decision record with this occurred_at passes the ingest schema (the published pattern's check). */
function schemaTakes(occurred_at: string): boolean {
  const record = { schema: "bursar.gateway-decision/1", event_id: "evt_1", occurred_at, decision: "allow", tool: "t", args: {} };
  return decision_record_schema.safeParse(record).success;
}

describe("isRfc3339", () => {
  it.each(valid)("takes %s", (value) => {
    expect(isRfc3339(value)).toBe(true);
    expect(schemaTakes(value)).toBe(true);
  });

  it.each(invalid)("refuses %s: %s", (value) => {
    expect(isRfc3339(value)).toBe(false);
    expect(schemaTakes(value)).toBe(false);
  });

  it("reads a time by position as the RFC 3339 pattern does, with the same reason for each refusal", () => {
    // The pattern rfc3339Problem was first written with; it now reads the fields by position.
    const pattern = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|[+-](\d{2}):(\d{2}))$/;
    const byPattern = (value: string): string | undefined => {
      const match = pattern.exec(value);
      if (!match) return rfc3339Problem("not a time");
      const field = (group: number) => Number(match[group] ?? 0);
      const days = [31, field(1) % 4 === 0 && (field(1) % 100 !== 0 || field(1) % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
      if (field(2) < 1 || field(2) > 12 || field(3) < 1 || field(3) > days[field(2) - 1]!) return `names a date that does not exist (${match[1]}-${match[2]}-${match[3]})`;
      if (field(4) > 23 || field(5) > 59 || field(6) > 59) return rfc3339Problem(`2026-01-01T${match[4]}:${match[5]}:${match[6]}Z`);
      if (field(8) > 23 || field(9) > 59) return "has an offset beyond ±23:59";
      if ((match[7]?.length ?? 0) > 9) return rfc3339Problem("2026-01-01T00:00:00.0000000000Z");
      return undefined;
    };
    // Texts near the shape: each place is a digit, a separator of the shape or another character.
    const place = fc.constantFrom(..."0123456789", "1", "2", "9", "-", ":", "T", ".", "Z", "+", "t", " ", "٣", "");
    const near = fc.array(place, { minLength: 16, maxLength: 34 }).map((chars) => chars.join(""));
    const valid_shaped = fc
      .tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: 0, max: 99 }))
      .chain(([y, mo, d, h, mi, se]) =>
        fc.tuple(fc.constantFrom("", ".", ".5", ".123456789", ".1234567890"), fc.constantFrom("Z", "+05:30", "-23:59", "+24:00", "+05:60", "z", "+0530", "+05-30", "+05:3", "Z ", "")).map(([fraction, zone]) => {
          const two = (n: number) => String(n).padStart(2, "0");
          return `${String(y).padStart(4, "0")}-${two(mo)}-${two(d)}T${two(h)}:${two(mi)}:${two(se)}${fraction}${zone}`;
        }),
      );
    fc.assert(
      fc.property(fc.oneof(near, valid_shaped), (value) => {
        expect(rfc3339Problem(value), value).toBe(byPattern(value));
      }),
      { numRuns: 20_000 },
    );
  });

  it("refuses an occurred_at that is not a string in a log entry as no time, not with a TypeError", () => {
    for (const occurred_at of [20261009, null, { at: "2026-10-09T14:03:11Z" }]) {
      expect(() => buildEntry({ kind: "ingest.decision", source: "src_1", body: {}, occurred_at: occurred_at as unknown as string }, 0, "2026-12-01T00:00:00.000Z")).toThrow(EvidenceInputError);
    }
  });

  it("refuses an impossible occurred_at in a log entry instead of storing the shifted day", () => {
    for (const occurred_at of ["2027-02-30T00:00:00Z", "2026-12-31T24:00:00Z"]) {
      expect(() => buildEntry({ kind: "ingest.decision", source: "src_1", body: {}, occurred_at }, 0, "2026-12-01T00:00:00.000Z")).toThrow(EvidenceInputError);
    }
  });
});

describe("a block's expires_at names a time that exists", () => {
  // The test clock starts at 2026-11-30T10:00Z: the first two shifted days fall within the 90-day
  // lifetime (the block was created, expiring a day off), the third past it (refused, but as too long).
  for (const [expires_at, reason] of [
    ["2026-11-31T00:00:00Z", "names a date that does not exist (2026-11-31)"],
    ["2026-12-31T24:00:00Z", "names a time of day that does not exist (24:00:00; hours 00–23, minutes and seconds 00–59)"],
    ["2027-02-29T00:00:00Z", "names a date that does not exist (2027-02-29)"],
  ]) {
    it(`${expires_at} is refused with 422 naming expires_at and what does not exist`, async () => {
      const t = await testLedger();
      const agent = await t.bursar.operator.createAgent({ name: "impossible-expiry" });
      await expect(t.bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", expires_at })).rejects.toMatchObject({
        status: 422,
        code: "validation_failed",
        details: { field: "expires_at" },
        message: `expires_at: ${reason}`,
      });
    });
  }

  it("takes the last day of a month and 23:59:59", async () => {
    const t = await testLedger();
    const agent = await t.bursar.operator.createAgent({ name: "possible-expiry" });
    const block = await t.bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", expires_at: "2026-12-31T23:59:59Z" });
    expect(block.expires_at).toBe("2026-12-31T23:59:59.000Z");
  });
});

describe("what a refused time is told", () => {
  /** The ingest schema's issues on occurred_at for a record otherwise valid. */
  function occurredAtIssues(occurred_at: string): string[] {
    const record = { schema: "bursar.gateway-decision/1", event_id: "evt_1", occurred_at, decision: "allow", tool: "t", args: {} };
    const parsed = decision_record_schema.safeParse(record);
    return parsed.success ? [] : parsed.error.issues.filter((issue) => issue.path[0] === "occurred_at").map((issue) => issue.message);
  }

  it.each([
    ["2026-02-29T14:03:11Z", "names a date that does not exist (2026-02-29)"],
    ["2026-12-31T24:00:00Z", "names a time of day that does not exist (24:00:00; hours 00–23, minutes and seconds 00–59)"],
    ["2026-10-09T00:00:00+24:00", "has an offset beyond ±23:59"],
    ["2026-10-09T14:03:11.1234567890Z", "has more than 9 fraction digits (the log keeps at most nanoseconds)"],
    ["2026-10-09 14:03:11Z", 'must be an RFC 3339 time with an offset, e.g. "2026-12-31T18:30:00Z" or "2027-01-01T00:00:00+05:30"'],
  ])("an occurred_at of %s gets one issue: %s", (occurred_at, reason) => {
    expect(occurredAtIssues(occurred_at)).toEqual([reason]);
  });
});
