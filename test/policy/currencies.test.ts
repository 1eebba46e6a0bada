// Currency is an active ISO 4217 code, in either case, everywhere it is checked: R0 in the
// policy, block creation in the ledger and the observer's shadow limits.

import { describe, expect, it } from "vitest";
import { shadow_settings_schema } from "../../src/observer/shadow.js";
import { checkCurrency, currency_codes, currencyProblem } from "../../src/policy/index.js";
import { fresh, testLedger } from "../support/ledger.js";

const accepted = ["INR", "inr", "Inr", "USD", "usd", "EUR", "JPY", "KWD", "XOF", "XCG", "ZWG", "VED", "SLE"];
const not_iso: Array<[string, string]> = [
  ["ZZZ", "not a code"],
  ["zzz", "not a code, lower case"],
  ["XXX", "no currency"],
  ["XTS", "reserved for testing"],
  ["XAU", "gold"],
  ["XAG", "silver"],
  ["XDR", "a unit of account"],
  ["XSU", "a unit of account"],
  ["XUA", "a unit of account"],
  ["BOV", "funds code"],
  ["CHE", "funds code"],
  ["CLF", "funds code"],
  ["USN", "funds code"],
  ["UYW", "funds code"],
  ["HRK", "withdrawn: Croatia uses the euro"],
  ["ZWL", "withdrawn: replaced by ZWG"],
  ["VEF", "withdrawn: replaced by VES"],
];
const wrong_shape: unknown[] = ["INR ", " INR", "IN", "INRR", "ÍNR", "ınr", "I N", "", "₹", "inr\u0000", 42, null, undefined, ["INR"]];

describe("currencyProblem", () => {
  it.each(accepted)("%s is an active ISO 4217 code", (currency) => {
    expect(currencyProblem(currency)).toBeUndefined();
  });

  it.each(not_iso)("%s (%s) is three letters but not an active ISO 4217 currency code", (currency) => {
    expect(currencyProblem(currency)).toBe(`"${currency}" is not an ISO 4217 currency code`);
  });

  it.each(wrong_shape.map((value) => [value]))("%j is not three ASCII letters", (value) => {
    expect(currencyProblem(value)).toBe("must be exactly three ASCII letters");
  });
});

describe("currency_codes", () => {
  it("is frozen, sorted, unique, upper-case ASCII and holds no X-code that is not money", () => {
    expect(Object.isFrozen(currency_codes)).toBe(true);
    expect([...currency_codes].sort()).toEqual(currency_codes);
    expect(new Set(currency_codes).size).toBe(currency_codes.length);
    for (const code of currency_codes) expect(code).toMatch(/^[A-Z]{3}$/);
    expect(currency_codes.filter((code) => code.startsWith("X"))).toEqual(["XAF", "XCD", "XCG", "XOF", "XPF"]);
  });
});

describe("R0: checkCurrency against an INR block", () => {
  it.each([["INR"], ["inr"]])("%s passes", (currency) => {
    expect(checkCurrency(currency, "INR")).toBeUndefined();
  });

  it.each([["ZZZ"], ["XXX"], ["XTS"], ["XAU"]])("%s is refused as not an ISO 4217 currency code, naming the field", (currency) => {
    expect(checkCurrency(currency, "INR")).toBe(`currency "${currency}" is not an ISO 4217 currency code`);
  });

  it.each([["INR "], ["IN"], ["INRR"], ["ÍNR"], [42], [null]])("%j keeps the shape message", (currency) => {
    expect(checkCurrency(currency, "INR")).toBe("currency must be exactly three ASCII letters");
  });

  it("a real currency that is not the block's is a mismatch, upper-cased", () => {
    expect(checkCurrency("usd", "INR")).toBe("currency USD does not match the block's INR");
  });
});

describe("R0 through the ledger", () => {
  const table: Array<[unknown, string]> = [
    ["INR", "ALLOW"],
    ["inr", "ALLOW"],
    ["ZZZ", "R0"],
    ["XXX", "R0"],
    ["XTS", "R0"],
    ["XAU", "R0"],
    ["INR ", "R0"],
    ["IN", "R0"],
    ["INRR", "R0"],
    ["ÍNR", "R0"],
  ];
  it.each(table)("create_order in %j on an INR block → %s", async (currency, rule) => {
    const t = await testLedger();
    const result = await t.order(fresh({ amount: 1000, currency }));
    expect(result.verdict.rule).toBe(rule);
    if (rule === "R0") expect(result.verdict.reason).toMatch(/^currency /);
  });

  it.each([["USD"], ["eur"], ["JPY"], ["kwd"]])("a block in %s is created upper-cased and allows calls in its currency, in either case", async (currency) => {
    const t = await testLedger();
    const other = await t.bursar.operator.createAgent({ name: "other" });
    const block = await t.bursar.operator.createBlock({ agent_id: other.agent_id, currency });
    expect(block.currency).toBe(currency.toUpperCase());
    for (const sent of [currency.toLowerCase(), currency.toUpperCase()]) {
      expect((await t.order(fresh({ amount: 1000, currency: sent }), other.agent_id)).verdict.rule).toBe("ALLOW");
    }
  });

  it.each([["ZZZ"], ["xxx"], ["XTS"], ["XAU"]])("a block in %s is refused at creation with a 422 naming currency", async (currency) => {
    const t = await testLedger();
    const other = await t.bursar.operator.createAgent({ name: "other" });
    await expect(t.bursar.operator.createBlock({ agent_id: other.agent_id, currency })).rejects.toMatchObject({
      status: 422,
      code: "validation_failed",
      message: `currency: "${currency}" is not an ISO 4217 currency code`,
      details: { field: "currency" },
    });
  });

  it.each([["INR "], ["IN"], ["ÍNR"]])("a block in %j is refused at creation with the shape message", async (currency) => {
    const t = await testLedger();
    const other = await t.bursar.operator.createAgent({ name: "other" });
    await expect(t.bursar.operator.createBlock({ agent_id: other.agent_id, currency })).rejects.toMatchObject({
      status: 422,
      message: "currency: must be exactly three ASCII letters",
      details: { field: "currency" },
    });
  });
});

describe("the observer's shadow limits", () => {
  const settings = (currency: unknown) => ({ tools: { pay: "create_order" }, currency, per_call_cap: 500_000, approval_threshold: 200_000 });

  it.each([["inr"], ["KWD"]])("take %s, upper-cased", (currency) => {
    expect(shadow_settings_schema.parse(settings(currency)).currency).toBe(currency.toUpperCase());
  });

  it.each([
    ["ZZZ", '"ZZZ" is not an ISO 4217 currency code'],
    ["XTS", '"XTS" is not an ISO 4217 currency code'],
    ["INR ", "must be exactly three ASCII letters"],
    ["ÍNR", "must be exactly three ASCII letters"],
  ])("refuse %j with one issue on currency: %s", (currency, message) => {
    const parsed = shadow_settings_schema.safeParse(settings(currency));
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues).toMatchObject([{ path: ["currency"], message }]);
  });
});
