// Which characters names refuse (invisible_or_control_characters) and which idempotency keys
// refuse (control_characters): a key is compared as sent, never shown as an identity, so only
// C0 controls and DEL are refused in it.

import { describe, expect, it } from "vitest";
import { control_characters, invisible_or_control_characters, invisibleOrControlCharacter } from "../../src/policy/arguments.js";
import { fresh, testLedger } from "../support/ledger.js";

/** Every code point the name check refuses, as ranges: the set in one place, so a change shows here. */
const refused_ranges: Array<[number, number]> = [
  [0x0000, 0x001f], [0x007f, 0x009f], [0x00ad, 0x00ad], [0x034f, 0x034f], [0x061c, 0x061c],
  [0x115f, 0x1160], [0x17b4, 0x17b5], [0x180b, 0x180f], [0x200b, 0x200f], [0x2028, 0x202e],
  [0x2060, 0x206f], [0x2800, 0x2800], [0x3164, 0x3164], [0xd800, 0xdfff], [0xfdd0, 0xfdef],
  [0xfe00, 0xfe0f], [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xffff], [0x13430, 0x1345f],
  [0x1bca0, 0x1bca3], [0x1d173, 0x1d17a], [0xe0000, 0xe0fff],
  ...Array.from({ length: 16 }, (_, plane): [number, number] => [(plane + 1) * 0x10000 + 0xfffe, (plane + 1) * 0x10000 + 0xffff]),
];
const isRefused = (code_point: number) => refused_ranges.some(([low, high]) => code_point >= low && code_point <= high);

describe("invisibleOrControlCharacter", () => {
  it("refuses exactly the listed code points from U+0000 to U+10FFFF", () => {
    for (let code_point = 0; code_point <= 0x10ffff; code_point++) {
      const text = `a${String.fromCodePoint(code_point)}b`;
      const expected = isRefused(code_point) ? `U+${code_point.toString(16).toUpperCase().padStart(4, "0")}` : undefined;
      if (invisibleOrControlCharacter(text) !== expected) {
        expect(invisibleOrControlCharacter(text), `U+${code_point.toString(16)}`).toBe(expected);
      }
    }
  });

  it("refuses every Default_Ignorable_Code_Point (Unicode 15.1) a name could hide, as a review found it missed", () => {
    // Each looked like "opsbot" and was taken before.
    for (const [name, code_point] of [
      ["ops\ufe0fbot", "U+FE0F"],
      ["ops\u{e0100}bot", "U+E0100"],
      ["ops\u180bbot", "U+180B"],
      ["ops\u{1d173}bot", "U+1D173"],
      ["ops\u{1bca0}bot", "U+1BCA0"],
      ["ops\ufff0bot", "U+FFF0"],
      ["ops\u{e0080}bot", "U+E0080"],
      ["ops\u{13430}bot", "U+13430"],
      ["ops\uffffbot", "U+FFFF"],
      ["\u2800", "U+2800"],
    ] as const) {
      expect(invisibleOrControlCharacter(name), name).toBe(code_point);
    }
  });

  it("names the first such character, and takes a surrogate pair as one character", () => {
    expect(invisibleOrControlCharacter("x\u200by\u202ez")).toBe("U+200B");
    expect(invisibleOrControlCharacter("\ud83d\ude00")).toBeUndefined();
    expect(invisibleOrControlCharacter("\ude00\ud83d")).toBe("U+DE00");
    expect(invisible_or_control_characters.test("plain name")).toBe(false);
  });
});

describe("idempotency_key keeps the narrow set", () => {
  it("control_characters is still C0 and DEL only (src/ledger/keys.ts hashes keys by it)", () => {
    expect(control_characters.test("\u001f")).toBe(true);
    expect(control_characters.test("\u007f")).toBe(true);
    for (const character of ["\u0085", "\u200b", "\u202e", "\ufeff", "\u2028"]) expect(control_characters.test(character)).toBe(false);
  });

  it.each([["\u202e"], ["\u200b"], ["\u200d"], ["\ufeff"], ["\u0085"], ["\u2028"]])(
    "a key holding %j is decided like any key (ALLOW), found again as sent, and differs from the key without it",
    async (character) => {
      const t = await testLedger();
      const key = `order-7${character}retry`;
      expect((await t.order({ amount: 1000, currency: "INR", idempotency_key: key })).verdict.rule).toBe("ALLOW");
      expect((await t.order({ amount: 1000, currency: "INR", idempotency_key: key })).verdict.rule).toBe("IN_FLIGHT");
      expect((await t.order({ amount: 1000, currency: "INR", idempotency_key: "order-7retry" })).verdict.rule).toBe("ALLOW");
    },
  );

  it("a key with a C0 control is still refused under R0", async () => {
    const t = await testLedger();
    const result = await t.order(fresh({ amount: 1000, currency: "INR", idempotency_key: "a\u0001b" }));
    expect(result.verdict).toMatchObject({ effect: "BLOCK", rule: "R0" });
  });
});
