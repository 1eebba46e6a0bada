// The one line a model reads with a refusal. A transient refusal (a call still in flight, a
// payment fetch the provider did not answer) says to repeat the same call with the same key; a
// model told "do not retry unchanged" mints a new idempotency key and buys twice. A final one
// (the provider says the payment does not exist) says not to retry.

import { describe, expect, it } from "vitest";
import { refusal } from "../../src/gate/results.js";
import { testLedger } from "../support/ledger.js";

describe("refusal advice", () => {
  it("IN_FLIGHT asks for the same call again, not a changed one", async () => {
    const t = await testLedger();
    try {
      const args = { amount: 1000, currency: "INR", idempotency_key: "basket-7" };
      // The first call's decision is committed and its provider call is still running.
      await t.order(args);
      const second = await t.bursar.gate.callToolAs(t.agent_id, "create_order", args);
      expect(second.structuredContent).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT" });
      expect(second.content[0]?.text).toContain("Repeat this same call, with the same idempotency_key");
      expect(second.content[0]?.text).not.toContain("Do not retry this call unchanged");
    } finally {
      await t.bursar.close();
    }
  });

  it("a capture of a payment the provider says does not exist is final, not transient", async () => {
    const t = await testLedger();
    try {
      const result = await t.bursar.gate.callToolAs(t.agent_id, "capture_payment", { payment_id: "pay_NoSuchPayment1", amount: 5000, currency: "INR" });
      // Answered as another agent's payment is (CALLER): the answer does not tell which ids exist.
      expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER", reason: "payment pay_NoSuchPayment1 not found among the orders this agent created through the gate" });
      expect(result.content[0]?.text).toContain("Do not retry this call unchanged.");
      expect(result.content[0]?.text).not.toContain("Repeat this same call");
    } finally {
      await t.bursar.close();
    }
  });

  const again = "Repeat this same call, with the same idempotency_key, later; never with a new key.";
  const never = "Do not retry this call unchanged.";
  it.each([
    ["R3", "the provider did not confirm the payment (provider timeout); retry", again],
    ["IN_FLIGHT", "a call with this idempotency key is still in flight; retry shortly", again],
    ["R5", "amount 70000 exceeds the per-call cap 60000", never],
    ["R1", "amount 5000 exceeds the available 1000", never],
  ])("%s: %s", (rule, reason, advice) => {
    expect(refusal({ rule, reason } as never).content[0]?.text).toBe(`BLOCKED by ${rule}: ${reason}. ${advice}`);
  });
});
