// The argument budget: arguments holding more than argument_values_max values (object members
// and array elements, at any depth) are not read; counting stops at the bound.

import { describe, expect, it } from "vitest";
import { argument_values_max, argumentProblem, holdsMoreValues, unread_arguments } from "../../src/policy/index.js";

const members = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, index) => [`k${index}`, index]));
const chain = (depth: number): unknown => (depth === 0 ? 0 : [chain(depth - 1)]);

describe("holdsMoreValues", () => {
  const cases: Array<[string, unknown, boolean]> = [
    ["a scalar", 5, false],
    ["null", null, false],
    ["1,000 members", members(argument_values_max), false],
    ["1,001 members", members(argument_values_max + 1), true],
    ["1,000 elements", Array(argument_values_max).fill(0), false],
    ["1,001 elements", Array(argument_values_max).fill(0).concat([0]), true],
    ["members and elements together past the bound", { a: Array(argument_values_max - 1).fill(0), b: 1 }, true],
    ["a chain 1,000 deep", chain(argument_values_max), false],
    ["a chain 1,001 deep", chain(argument_values_max + 1), true],
  ];
  for (const [name, value, expected] of cases) {
    it(`${name} → ${expected}`, () => expect(holdsMoreValues(value)).toBe(expected));
  }
});

describe("R0 on the unread stand-in", () => {
  it("names the bound, for every money tool", () => {
    for (const tool of ["create_order", "capture_payment"]) {
      expect(argumentProblem(tool, unread_arguments, "INR")).toBe("arguments hold more than 1000 values (members and elements at any depth); they are refused unread");
    }
  });
});
