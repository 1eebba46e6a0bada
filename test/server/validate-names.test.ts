// Operator-given names (agents, evidence sources, auditors) refuse what would make them display
// as something they are not, naming the field and the code point, never printing the character.

import { describe, expect, it } from "vitest";
import { z } from "zod";
import { nameSchema, parseBody } from "../../src/server/validate.js";
import { testLedger } from "../support/ledger.js";

const body_schema = z.object({ name: nameSchema(128) }).strict();

const refused: Array<[string, string, string]> = [
  ["a C0 control", "buyer\u0001", "U+0001"],
  ["a line feed", "audit\nor", "U+000A"],
  ["DEL", "buyer\u007f", "U+007F"],
  ["a C1 control (NEL)", "buyer\u0085x", "U+0085"],
  ["the last C1 control", "buyer\u009fx", "U+009F"],
  ["a soft hyphen", "pay\u00adroll", "U+00AD"],
  ["the Arabic letter mark", "buyer\u061cx", "U+061C"],
  ["the Mongolian vowel separator", "buyer\u180ex", "U+180E"],
  ["a zero-width space", "pay\u200broll", "U+200B"],
  ["a zero-width non-joiner", "pay\u200croll", "U+200C"],
  ["a zero-width joiner", "pay\u200droll", "U+200D"],
  ["a left-to-right mark", "buyer\u200ex", "U+200E"],
  ["a right-to-left mark", "buyer\u200fx", "U+200F"],
  ["a line separator inside", "buyer\u2028x", "U+2028"],
  ["a paragraph separator inside", "buyer\u2029x", "U+2029"],
  ["a left-to-right embedding", "\u202abuyer", "U+202A"],
  ["a right-to-left override", "buyer-\u202egnp.exe", "U+202E"],
  ["a word joiner", "buyer\u2060x", "U+2060"],
  ["an invisible plus", "buyer\u2064x", "U+2064"],
  ["a left-to-right isolate", "\u2066buyer", "U+2066"],
  ["a pop directional isolate", "buyer\u2069x", "U+2069"],
  ["a zero-width no-break space inside", "buyer\ufeffx", "U+FEFF"],
  ["a Hangul filler", "buyer\u3164x", "U+3164"],
  ["a tag character", "buyer\u{e0041}x", "U+E0041"],
  ["a lone high surrogate", "buyer\ud800x", "U+D800"],
  ["a lone low surrogate", "buyer\udc00x", "U+DC00"],
];

const accepted = ["buyer", "procurement-bot #2", "Zoë's agent", "रमेश का एजेंट", "مشتری", "採購代理", "buyer 😀", "team 👍🏽"];

describe("nameSchema", () => {
  it.each(refused)("refuses %s, naming the code point", (_what, name, code_point) => {
    const parsed = body_schema.safeParse({ name });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues).toMatchObject([{ path: ["name"], message: `must not contain ${code_point} (invisible or control character)` }]);
  });

  it.each(accepted)("accepts %s", (name) => {
    expect(body_schema.parse({ name })).toEqual({ name });
  });

  it("a 422 from parseBody names the field and the first code point, and does not repeat the character", () => {
    let thrown: unknown;
    try {
      parseBody(body_schema, { name: "buyer-\u202egnp.exe\u200b" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({
      status: 422,
      code: "validation_failed",
      message: "name: must not contain U+202E (invisible or control character)",
      details: { issues: [{ field: "name", message: "must not contain U+202E (invisible or control character)" }] },
    });
    expect((thrown as Error).message).not.toContain("\u202e");
  });

  it("trims surrounding white space, including U+2028 and U+FEFF at the ends, before checking", () => {
    expect(body_schema.parse({ name: "\ufeff buyer \u2028" })).toEqual({ name: "buyer" });
  });

  it("keeps its length limit and refuses an empty name", () => {
    expect(body_schema.safeParse({ name: "n".repeat(128) }).success).toBe(true);
    expect(body_schema.safeParse({ name: "n".repeat(129) }).success).toBe(false);
    expect(body_schema.safeParse({ name: "   " }).success).toBe(false);
  });
});

describe("agent names", () => {
  it("refuse the same characters when the agent is created through the ledger (API, CLI and library alike)", async () => {
    const { bursar } = await testLedger();
    try {
      for (const [, name, code_point] of refused) {
        await expect(bursar.operator.createAgent({ name }), name).rejects.toMatchObject({
          status: 422,
          code: "validation_failed",
          message: `name: must not contain ${code_point} (invisible or control character)`,
        });
      }
      await expect(bursar.operator.createAgent({ name: "buyer café ✓" })).resolves.toMatchObject({ name: "buyer café ✓" });
      // Trimmed as auditor and source names are: a leading BOM or spaces show as nothing.
      await expect(bursar.operator.createAgent({ name: "\ufeff buyer two " })).resolves.toMatchObject({ name: "buyer two" });
    } finally {
      await bursar.close();
    }
  });
});
