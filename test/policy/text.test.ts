// How Bursar's messages show caller-chosen text: cut without splitting a character.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hasLoneSurrogate } from "../../src/evidence/canonical.js";
import { characterCount, shortened, shown_path_units_max, shown_segments_max, shownPath } from "../../src/policy/text.js";

describe("shortened", () => {
  it("keeps text that fits, cuts longer text after the limit with an ellipsis, never inside a surrogate pair", () => {
    expect(shortened("abc", 3)).toBe("abc");
    expect(shortened("abcd", 3)).toBe("abc…");
    expect(shortened("ab😀cd", 3)).toBe("ab…");
    expect(shortened("a😀bcd", 3)).toBe("a😀…");
  });

  it("never leaves a lone surrogate where the text had none", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), fc.integer({ min: 1, max: 30 }), (text, limit) => {
        expect(hasLoneSurrogate(shortened(text, limit))).toBe(false);
        expect(shortened(text, limit).length).toBeLessThanOrEqual(limit + 1);
      }),
    );
  });
});

describe("characterCount and shownPath", () => {
  it("counts a surrogate pair once", () => {
    expect(characterCount("a😀b")).toBe(3);
    expect(characterCount("\ud800x")).toBe(2);
  });

  it(`shortens each segment, shows at most ${shown_segments_max} segments and ${shown_path_units_max} code units`, () => {
    expect(shownPath(["args", "x".repeat(100), "0"])).toBe(`args.${"x".repeat(64)}….0`);
    expect(shownPath(Array(20).fill("d"))).toBe(`${Array(shown_segments_max).fill("d").join(".")}.…`);
    const long = shownPath(Array(16).fill("y".repeat(60)));
    expect(long).toHaveLength(shown_path_units_max + 1);
    expect(long.endsWith("…")).toBe(true);
  });
});
