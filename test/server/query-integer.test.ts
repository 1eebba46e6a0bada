// A query integer refused says why by what was sent: not an integer, below the least allowed, or
// past the range (named with its limit): digits past the largest exact integer are a number out
// of range, not "not an integer".

import { describe, expect, it } from "vitest";
import { queryInteger } from "../../src/server/validate.js";

function refusal(query: Record<string, string>, range: Parameters<typeof queryInteger>[2] = {}) {
  try {
    queryInteger(query, "n", range);
  } catch (error) {
    const { message, details } = error as { message: string; details?: unknown };
    return { message, details };
  }
  throw new Error("accepted");
}

describe("queryInteger", () => {
  it("takes digits up to the largest exact integer", () => {
    expect(queryInteger({ n: "0" }, "n")).toBe(0);
    expect(queryInteger({ n: String(Number.MAX_SAFE_INTEGER) }, "n")).toBe(Number.MAX_SAFE_INTEGER);
    expect(queryInteger({}, "n", { fallback: 7 })).toBe(7);
  });

  const cases: Array<[string, Record<string, string>, Parameters<typeof queryInteger>[2], string, unknown]> = [
    ["not digits", { n: "abc" }, {}, "n must be a non-negative integer", { param: "n" }],
    ["a leading zero", { n: "010" }, {}, "n must be a non-negative integer", { param: "n" }],
    ["below the least allowed", { n: "0" }, { min: 1 }, "n must be an integer of at least 1", { param: "n" }],
    ["past the largest exact integer", { n: "9007199254740992" }, {}, `n must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`, { param: "n", limit: Number.MAX_SAFE_INTEGER }],
    ["twenty digits", { n: "99999999999999999999" }, { min: 1 }, `n must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}`, { param: "n", limit: Number.MAX_SAFE_INTEGER }],
    ["past a range's end", { n: "501" }, { min: 1, max: 500 }, "n must be an integer from 1 to 500", { param: "n", limit: 500 }],
  ];
  for (const [name, query, range, message, details] of cases) {
    it(`refuses ${name}, saying so`, () => {
      expect(refusal(query, range)).toEqual({ message, details });
    });
  }
});
