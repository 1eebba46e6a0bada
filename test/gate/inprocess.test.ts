// The gate in-process through createBursar: the Razorpay client reaches the embedded
// simulator by the same wire format, and webhooks come back signed.

import { afterEach, describe, expect, it } from "vitest";
import { createBursar, sequentialIds, type Bursar } from "../../src/index.js";
import { manualClock } from "../support/clock.js";

let bursar: Bursar | undefined;
afterEach(async () => {
  await bursar?.close();
  bursar = undefined;
});

async function setup() {
  bursar = await createBursar({ db: ":memory:", clock: manualClock(), ids: sequentialIds() });
  const agent = await bursar.operator.createAgent({ name: "buyer" });
  await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
  return { b: bursar, token: agent.token };
}

async function pay(b: Bursar, order_id: string, card = "4111111111111111"): Promise<string> {
  const response = await b.simulator!.app.inject({ method: "POST", url: `/simulator/sim/orders/${order_id}/pay`, payload: { card } });
  expect(response.statusCode).toBeLessThan(300);
  return (response.json() as { razorpay_payment_id: string }).razorpay_payment_id;
}

describe("gate in-process", () => {
  it("create → pay → capture settles held into spent, with evidence on every result", async () => {
    const { b, token } = await setup();
    const created = await b.gate.callTool(token, "create_order", { amount: 50_000, currency: "inr", receipt: "basket-1" });
    expect(created.isError).toBeUndefined();
    const order = created.structuredContent.order as { id: string; amount: number; currency: string };
    expect(order).toMatchObject({ amount: 50_000, currency: "INR" });
    expect(created.structuredContent.block).toMatchObject({ held: 50_000, available: 950_000 });
    expect(created.structuredContent.evidence).toMatchObject({ seq: expect.any(Number), leaf_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });

    const payment_id = await pay(b, order.id);
    const captured = await b.gate.callTool(token, "capture_payment", { payment_id, amount: 50_000, currency: "INR" });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    expect(captured.structuredContent.block).toMatchObject({ spent: 50_000, held: 0, available: 950_000 });

    await b.simulator!.simulator.deliverWebhooksNow();
    const block = await b.gate.callTool(token, "get_block", {});
    expect(block.structuredContent).toMatchObject({ spent: 50_000, held: 0 });
  });
});
