// A provider lookup that gets no answer about the order or payment (rate limited, a 5xx) is
// unknown, not "no such order": a payment.captured webhook that needed it is not consumed (503,
// so Razorpay delivers it again), the reservation check says "unknown", and a capture's payment
// pre-fetch tells the agent to repeat the call. Over real HTTP, through the mounted simulator's
// fault knobs (rate_limit_next answers Razorpay's 429 "Too many requests").

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { payOrder, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;
let server: TestServer;

beforeAll(async () => {
  server = await testServer({ BURSAR_PROVIDER_TIMEOUT_MS: "300" });
});
afterEach(() => server.started.simulator?.faults.reset());
afterAll(async () => server.close());

const simulator = () => server.started.simulator!;
const block = async (block_id: string) => (await server.api<Record<string, number>>("GET", `/api/v1/blocks/${block_id}`)).body;

/** An order the provider created whose answer the gate never got: its reservation awaits the order. */
async function lostOrder(name: string, amount: number) {
  const agent = await server.agent(name);
  const client = await server.client(agent.token);
  simulator().faults.set({ error_5xx_next: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
  const created = await client.callTool({ name: "create_order", arguments: { amount, currency: "INR" } });
  simulator().faults.reset();
  expect(created.structuredContent).toMatchObject({ effect: "ALLOW", provider: "unknown" });
  const reservation_id = (created.structuredContent as Structured).reservation_id as string;
  const order = simulator().state.orders().find((row) => row.receipt === reservation_id) as { id: string } | undefined;
  if (!order) throw new Error("the simulator did not create the order");
  return { agent, client, reservation_id, order_id: order.id };
}

describe("provider lookups without an answer", () => {
  it("a rate-limited order lookup leaves a payment.captured webhook unconsumed (503), and its redelivery settles", async () => {
    const { agent, order_id } = await lostOrder("lk-webhook", 10_000);
    // Only payment.captured is let through: order.paid names the receipt itself and needs no lookup.
    simulator().faults.set({ webhook_drop_next: 100 });
    const payment_id = await payOrder(server.url, order_id);
    const captured = await server.started.bursar.gate.gateContext.provider.capturePayment(payment_id, { amount: 10_000, currency: "INR" });
    expect(captured).toMatchObject({ kind: "ok" });
    const event = simulator().state.outbox().find((entry) => entry.event === "payment.captured");
    if (!event) throw new Error("the simulator emitted no payment.captured");
    simulator().faults.set({ webhook_drop_next: 0, rate_limit_next: 1_000, only_routes: ["GET /v1/orders/:id"] });
    simulator().redeliverWebhook(event.event_id);
    await simulator().deliverWebhooksNow();
    const attempts = simulator().state.outbox().filter((entry) => entry.event_id === event.event_id).flatMap((entry) => entry.attempts);
    expect(attempts.map((attempt) => attempt.status)).toContain(503);
    expect(await block(agent.block_id)).toMatchObject({ held: 10_000, spent: 0 });
    simulator().faults.reset();
    await simulator().deliverWebhooksNow();
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 10_000 });
  });

  for (const fault of ["rate_limit_next", "error_5xx_next"] as const) {
    it(`the reservation check says "unknown", not "not_found", when the receipt lookup gets ${fault}`, async () => {
      const { reservation_id, order_id } = await lostOrder(`lk-check-${fault}`, 5_000);
      simulator().faults.set({ [fault]: 1, only_routes: ["GET /v1/orders"] });
      const checked = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
      expect(checked.body).toMatchObject({ outcome: "unknown" });
      const answered = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
      expect(answered.body).toMatchObject({ outcome: "no_capture", order_id });
    });
  }

  it("a rate-limited payment pre-fetch refuses the capture under R3 and says to repeat the same call", async () => {
    const agent = await server.agent("lk-capture");
    const client = await server.client(agent.token);
    const created = await client.callTool({ name: "create_order", arguments: { amount: 8_000, currency: "INR" } });
    const order_id = ((created.structuredContent as Structured).order as { id: string }).id;
    const payment_id = await payOrder(server.url, order_id);
    simulator().faults.set({ rate_limit_next: 1, only_routes: ["GET /v1/payments/:id"] });
    const args = { payment_id, amount: 8_000, currency: "INR", idempotency_key: "cap-1" };
    const refused = await client.callTool({ name: "capture_payment", arguments: args });
    expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R3" });
    expect((refused.content as Array<{ text: string }>)[0]?.text).toContain("Repeat this same call, with the same idempotency_key");
    const repeated = await client.callTool({ name: "capture_payment", arguments: args });
    expect(repeated.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
  });
});
