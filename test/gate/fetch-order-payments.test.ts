// fetch_order_payments, as Razorpay's MCP server has it: the payments on one of the agent's own
// orders, so an agent written for that server finds the payment id to capture. Another agent's
// order, an order made outside the gate and a malformed id are refused before the provider is
// asked; each answer that asks it counts against the agent's look-ups.

import { afterEach, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { test_card_declined } from "../../src/provider/simulator/index.js";
import { payInProcess, toolCallers } from "../support/inprocess.js";

let bursar: Bursar | undefined;
afterEach(async () => {
  await bursar?.close();
  bursar = undefined;
});

async function setup(lookups_per_minute = 60) {
  bursar = await createBursar({ db: ":memory:", lookups_per_minute });
  return { b: bursar, ...toolCallers(bursar) };
}

describe("fetch_order_payments", () => {
  it("lists no payment before the order is paid, then each payment as the provider reports it, and the listed id captures", async () => {
    const t = await setup();
    const alice = await t.agent("alice");
    const order = (await alice("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
    const none = await alice("fetch_order_payments", { order_id: order.id });
    expect(none.isError).toBeFalsy();
    expect(none.structuredContent).toEqual({ order_id: order.id, count: 0, payments: [] });
    expect(none.content).toEqual([{ type: "text", text: `Order ${order.id} has no payments yet.` }]);

    // A declined card first (the checkout answers 400, and the provider keeps a failed payment).
    await t.b.simulator!.app.inject({ method: "POST", url: `/simulator/sim/orders/${order.id}/pay`, payload: { card: test_card_declined } });
    const paid = await payInProcess(t.b, order.id);
    const listed = await alice("fetch_order_payments", { order_id: order.id });
    const payments = (listed.structuredContent as { payments: Array<{ id: string; status: string }> }).payments;
    expect(listed.structuredContent).toMatchObject({ order_id: order.id, count: 2 });
    expect(payments.map((payment) => payment.status).sort()).toEqual(["authorized", "failed"]);
    expect(payments).toContainEqual({ id: paid, order_id: order.id, amount: 5_000, currency: "INR", status: "authorized" });
    expect(JSON.stringify(listed.content)).toContain(`${paid} 5000 INR authorized`);

    const captured = await alice("capture_payment", { payment_id: paid, amount: 5_000, currency: "INR" });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: paid, status: "captured" } });
    const after = await alice("fetch_order_payments", { order_id: order.id });
    expect((after.structuredContent as { payments: Array<{ id: string; status: string }> }).payments).toContainEqual(expect.objectContaining({ id: paid, status: "captured" }));
  });

  it("refuses a missing or malformed id (R0), another agent's order and one the gate never made (CALLER), without asking the provider", async () => {
    const t = await setup();
    const alice = await t.agent("alice");
    const bob = await t.agent("bob");
    const order = (await alice("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
    const before = t.providerRequests();
    const refusals: Array<[Record<string, unknown>, string, RegExp]> = [
      [{}, "R0", /^order_id is required$/],
      [{ order_id: 7 }, "R0", /^order_id must match/],
      [{ order_id: "order_x/../../payments" }, "R0", /^order_id must match/],
      [{ order_id: "order_NeverMade1" }, "CALLER", /not found among the orders this agent created/],
    ];
    for (const [args, rule, reason] of refusals) {
      const answer = await bob("fetch_order_payments", args);
      expect(answer.isError).toBe(true);
      expect(answer.structuredContent).toMatchObject({ effect: "BLOCK", rule, reason: expect.stringMatching(reason) });
    }
    const alices = await bob("fetch_order_payments", { order_id: order.id });
    expect(alices.structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER" });
    expect(t.providerRequests()).toBe(before);
  });

  it("counts against the agent's provider look-ups: past the limit it answers rate_limited without asking the provider", async () => {
    const t = await setup(2);
    const alice = await t.agent("alice");
    const order = (await alice("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ order: { id: order.id } });
    expect((await alice("fetch_order_payments", { order_id: order.id })).structuredContent).toMatchObject({ count: 0 });
    const before = t.providerRequests();
    const limited = await alice("fetch_order_payments", { order_id: order.id });
    expect(limited.structuredContent).toMatchObject({ error: { code: "rate_limited", message: expect.stringContaining("fetch_order_payments") } });
    expect(t.providerRequests()).toBe(before);
  });
});
