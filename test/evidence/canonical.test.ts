// canonicalJson is RFC 8785: byte-identical to the npm `canonicalize` package (the reference
// implementation DESIGN.md names) on random JSON values, and it refuses what JSON cannot carry.

import fc from "fast-check";
import canonicalize from "canonicalize";
import { describe, expect, it } from "vitest";
import { canonicalJson, CanonicalJsonError } from "../../src/evidence/canonical.js";

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
