// Numbers JSON.parse does not keep as sent: found by their text, whatever surrounds them, and
// never in text JSON.stringify wrote (which writes each double in its shortest exact form).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { unkeptPlaces } from "../../src/ingest/duplicate-keys.js";
import { holdsInexactNumber, keptExactly } from "../../src/ingest/numbers.js";

const kept = (token: string) => keptExactly(token, 0, token.length);

describe("keptExactly", () => {
  it("tells a number a double gives back as sent from one it reads as another", () => {
    const cases: Array<[string, boolean]> = [
      ["0", true],
      ["-0", true],
      ["123456789012345", true],
      ["9007199254740991", true],
      ["9007199254740992", true],
      ["9007199254740993", false],
      ["1234567890123456789", false],
      ["12345678901234567891", false],
      ["100000000000000000000", true],
      ["1E21", true],
      ["1.50", true],
      ["0.1", true],
      ["0.10000000000000000001", false],
      ["0.30000000000000004", true],
      // 17 digits, as C's %.17g writes a double: the double its writer meant.
      ["0.33333333333333331", true],
      ["4.3499999999999996", true],
      ["5.6843418860808015e-14", true],
      ["12345678901234567", false],
      // A double written to fewer digits than its shortest form's, or more: C's %.16g and %.15g,
      // Java's Double.toString (Jackson's default), and %.17g of an integer-valued double.
      ["0.07000000000000001", true],
      ["0.5600000000000001", true],
      ["4.9E-324", true],
      ["9.999999999999999E22", true],
      ["5.049999999999999E21", true],
      ["6.83658539674212e-310", true],
      ["72057594037927936", true],
      ["96857284816701856", true],
      // 17 digits that are not a double's own: they read as 100, 5e-324 and 9007199254740992.
      ["99.999999999999999", false],
      ["2.4703282292062328e-324", false],
      ["9007199254740993.0", false],
      // A hundred thousand zeros, judged as any other number (no timing is asserted: the regex
      // that once trimmed them took seconds on this, see decimalForm).
      [`1.${"0".repeat(100_000)}1`, false],
      [`1.${"0".repeat(100_000)}`, true],
      ["12345678901234567891.0", false],
      ["1.00000000000000000001e3", false],
      ["5e-324", true],
      ["1e-400", false],
      ["1e400", true],
      ["-1.7976931348623157e308", true],
    ];
    for (const [token, expected] of cases) expect(kept(token), token).toBe(expected);
  });

  it("keeps every double as JSON.stringify writes it, and as %.15g, %.16g and %.17g write it when that reads back as the double", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (value) => {
        expect(kept(JSON.stringify(value))).toBe(true);
        for (const digits of [15, 16, 17]) {
          const written = value.toPrecision(digits);
          if (Number(written) === value) expect(kept(written), written).toBe(true);
        }
      }),
      { numRuns: 20_000 },
    );
  });
});

describe("holdsInexactNumber and unkeptPlaces", () => {
  it("find a number by its text outside strings, and name its path", () => {
    const text = '{"id":"12345678901234567891","a":[1,{"b":12345678901234567891}],"c":-9007199254740993}';
    expect(holdsInexactNumber(text)).toBe(true);
    expect(unkeptPlaces(text)).toEqual([
      { path: "a.1.b", problem: "inexact_number" },
      { path: "c", problem: "inexact_number" },
    ]);
    expect(holdsInexactNumber('{"id":"12345678901234567891","k\\"12345678901234567891":1}')).toBe(false);
    // In a delivery (an array), each element's first place only; a bare element is named by its index.
    expect(unkeptPlaces('[{"a":1e-400,"b":1e-400},{"x":1},1e-400]')).toEqual([
      { path: "0.a", problem: "inexact_number" },
      { path: "2", problem: "inexact_number" },
    ]);
  });

  it("find none in any JSON value JSON.stringify wrote", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(0, 2), (value, indent) => {
        const text = JSON.stringify(value, null, indent) ?? "null";
        expect(holdsInexactNumber(text)).toBe(false);
        expect(unkeptPlaces(text)).toEqual([]);
      }),
      { numRuns: 2_000 },
    );
  });
});
