// A call without idempotency_key gets a derived key, and a replay is checked before R0. The
// key used to bind only (amount, currency, payment/order id), so a call R0 must refuse (a stray
// `transfers` / `partial_payment`, a currency that upper-cases to the block's, an empty key)
// replayed an earlier ALLOW, with an evidence entry saying so. DESIGN.md: "a stray `transfers`
// field is refused under R0 with evidence"; only `receipt` and `notes` are left out of the key.

import { describe, expect, it } from "vitest";
import { testLedger } from "../support/ledger.js";

async function allowedOrder() {
  const t = await testLedger();
  const first = await t.order({ amount: 1000, currency: "INR" });
  expect(first.verdict.rule).toBe("ALLOW");
  await t.bursar.ledger.completeOrder(
    { agent_id: t.agent_id, key: first.key?.key as string, reservation_id: first.reservation?.reservation_id as string },
    { kind: "ok", value: { id: "order_A1", amount: 1000, currency: "INR", status: "created" } },
  );
  return t;
}

describe("a derived key binds every argument but receipt and notes", () => {
  it("a stray `transfers` argument is refused under R0 (not replayed as ALLOW)", async () => {
    const t = await allowedOrder();
    const r = await t.order({ amount: 1000, currency: "INR", transfers: [{ account: "acc_X", amount: 1000, currency: "INR" }] });
    expect(r.verdict).toMatchObject({ effect: "BLOCK", rule: "R0" });
  });

  it("`partial_payment` is refused under R0", async () => {
    const t = await allowedOrder();
    const r = await t.order({ amount: 1000, currency: "INR", partial_payment: true });
    expect(r.verdict).toMatchObject({ effect: "BLOCK", rule: "R0" });
  });

  it("a non-ASCII currency that upper-cases to the block's (dotless i: 'ınr') is refused under R0", async () => {
    const t = await allowedOrder();
    const r = await t.order({ amount: 1000, currency: "\u0131nr" });
    expect(r.verdict).toMatchObject({ effect: "BLOCK", rule: "R0" });
  });

  it("an empty idempotency_key is refused under R0", async () => {
    const t = await allowedOrder();
    const r = await t.order({ amount: 1000, currency: "INR", idempotency_key: "" });
    expect(r.verdict).toMatchObject({ effect: "BLOCK", rule: "R0" });
  });

  it("a retry that rewords only receipt and notes, or writes the currency in lower case, still replays", async () => {
    const t = await allowedOrder();
    const r = await t.order({ amount: 1000, currency: "inr", receipt: "retry 2", notes: { why: "timeout" } });
    expect(r.verdict).toMatchObject({ effect: "ALLOW", replay: true });
  });
});

describe("through the gate: what the agent and the evidence see", () => {
  it("create_order with `transfers` answers BLOCK R0, not 'ALLOWED ... (replayed)'", async () => {
    const t = await testLedger();
    const call = (args: Record<string, unknown>) => t.bursar.gate.callToolAs(t.agent_id, "create_order", args);
    try {
      const first = await call({ amount: 5000, currency: "INR" });
      expect(first.structuredContent.effect).toBe("ALLOW");
      const routed = await call({
        amount: 5000,
        currency: "INR",
        transfers: [{ account: "acc_attacker", amount: 5000, currency: "INR" }],
      });
      expect(routed.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
    } finally {
      await t.bursar.close();
    }
  });
});
