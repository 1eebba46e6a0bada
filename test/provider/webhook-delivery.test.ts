// Webhook delivery from the simulator to a small local receiver over loopback: signatures over the
// bytes received, bounded retries, and the duplicate / out-of-order / late / drop / redeliver knobs.

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createRazorpayProvider } from "../../src/provider/razorpay/index.js";
import { webhook_attempts_max } from "../../src/provider/simulator/index.js";
import {
  expectOk,
  key_id,
  key_secret,
  pay,
  startReceiver,
  startSimulator,
  waitFor,
  webhook_secret,
  type RunningSimulator,
  type WebhookReceiver,
} from "./support.js";

let receiver: WebhookReceiver;
const running: RunningSimulator[] = [];
const verifier = createRazorpayProvider({ key_id, key_secret, webhook_secret });

beforeAll(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
  receiver.received.length = 0;
  receiver.respond = () => 200;
});
afterAll(async () => {
  await receiver.close();
});

async function simulatorWithWebhooks(auto_deliver = true): Promise<RunningSimulator> {
  const sim = await startSimulator({ webhook_url: receiver.url, webhook_retry_base_ms: 20, auto_deliver });
  running.push(sim);
  return sim;
}

/** Creates, pays and captures an order: emits payment.authorized, payment.captured, order.paid. */
async function purchase(sim: RunningSimulator, receipt: string): Promise<{ order_id: string; payment_id: string }> {
  const provider = sim.provider();
  const order = expectOk(await provider.createOrder({ amount: 40_000, currency: "INR", receipt }));
  const payment_id = (await pay(sim.base_url, order.id)).body.razorpay_payment_id as string;
  expectOk(await provider.capturePayment(payment_id, { amount: 40_000, currency: "INR" }));
  return { order_id: order.id, payment_id };
}

describe("delivery", () => {
  it("delivers signed events in order, each verifiable over the exact bytes received", async () => {
    const sim = await simulatorWithWebhooks();
    await purchase(sim, "rsv_deliver");
    await waitFor(() => receiver.received.length === 3, 5_000, "three webhooks");
    expect(receiver.received.map((webhook) => webhook.event)).toEqual(["payment.authorized", "payment.captured", "order.paid"]);
    for (const webhook of receiver.received) {
      expect(verifier.verifyWebhook(webhook.raw, webhook.signature)).toEqual({ ok: true });
      expect(webhook.event_id).toMatch(/^evt_[A-Za-z0-9]+$/);
    }
    expect(new Set(receiver.received.map((webhook) => webhook.event_id)).size).toBe(3);
    // The receiver records a webhook before answering, so the outbox may lag it by one response.
    await waitFor(() => sim.simulator.state.outbox().every((entry) => entry.state === "delivered"), 5_000, "outbox delivered");
  });

  it("retries a non-2xx answer with backoff until it is accepted", async () => {
    receiver.respond = (index) => (index < 2 ? 500 : 200);
    const sim = await simulatorWithWebhooks();
    const order = expectOk(await sim.provider().createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_retry" }));
    await pay(sim.base_url, order.id);
    await waitFor(() => sim.simulator.state.outbox()[0]?.state === "delivered", 5_000, "delivery after retries");
    const [entry] = sim.simulator.state.outbox();
    expect(entry!.attempts.map((attempt) => attempt.status)).toEqual([500, 500, 200]);
    expect(receiver.received.map((webhook) => webhook.event_id)).toEqual([entry!.event_id, entry!.event_id, entry!.event_id]);
  });

  it(`gives up after ${webhook_attempts_max} attempts`, async () => {
    receiver.respond = () => 503;
    const sim = await startSimulator({ webhook_url: receiver.url, webhook_retry_base_ms: 5 });
    running.push(sim);
    const order = expectOk(await sim.provider().createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_giveup" }));
    await pay(sim.base_url, order.id);
    await waitFor(() => sim.simulator.state.outbox()[0]?.state === "failed", 5_000, "failed state");
    expect(sim.simulator.state.outbox()[0]!.attempts).toHaveLength(webhook_attempts_max);
    expect(receiver.received).toHaveLength(webhook_attempts_max);
  });

  it("with auto delivery off, nothing is sent until deliverWebhooksNow()", async () => {
    const sim = await simulatorWithWebhooks(false);
    await purchase(sim, "rsv_manual");
    // A twin with auto delivery on, given the same purchase after this one, to its own receiver:
    // once all its events have been delivered, background delivery has had every chance to send
    // this simulator's earlier events (queued first, on the same timers), had it been on.
    const twin_receiver = await startReceiver();
    try {
      const twin = await startSimulator({ webhook_url: twin_receiver.url, webhook_retry_base_ms: 20 });
      running.push(twin);
      await purchase(twin, "rsv_auto_twin");
      await waitFor(() => twin.simulator.state.outbox().filter((entry) => entry.state === "delivered").length === 3, 5_000, "the twin's three deliveries");
      expect(twin_receiver.received.map((webhook) => webhook.event)).toEqual(["payment.authorized", "payment.captured", "order.paid"]);
    } finally {
      await twin_receiver.close();
    }
    // Meanwhile this one attempted nothing: every event still waits, with no attempt made.
    expect(receiver.received).toHaveLength(0);
    expect(sim.simulator.state.outbox().map((entry) => [entry.event, entry.state, entry.attempts.length])).toEqual([
      ["payment.authorized", "pending", 0],
      ["payment.captured", "pending", 0],
      ["order.paid", "pending", 0],
    ]);
    expect(await sim.simulator.deliverWebhooksNow()).toEqual({ attempted: 3, delivered: 3, failed: 0 });
    expect(receiver.received.map((webhook) => webhook.event)).toEqual(["payment.authorized", "payment.captured", "order.paid"]);
  });
});

describe("webhook fault knobs", () => {
  it("duplicate: the next event arrives twice with the same event id and bytes", async () => {
    const sim = await simulatorWithWebhooks(false);
    sim.simulator.faults.set({ webhook_duplicate_next: 1 });
    const order = expectOk(await sim.provider().createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_dup" }));
    await pay(sim.base_url, order.id);
    await sim.simulator.deliverWebhooksNow();
    expect(receiver.received).toHaveLength(2);
    const [first, second] = receiver.received;
    expect(second!.event_id).toBe(first!.event_id);
    expect(second!.raw.equals(first!.raw)).toBe(true);
  });

  it("out of order: a held event goes out after the next one", async () => {
    const sim = await simulatorWithWebhooks();
    const provider = sim.provider();
    const order = expectOk(await provider.createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_ooo" }));
    const payment_id = (await pay(sim.base_url, order.id)).body.razorpay_payment_id as string;
    await waitFor(() => receiver.received.length === 1, 5_000, "payment.authorized");
    sim.simulator.faults.set({ webhook_out_of_order_next: 1 });
    expectOk(await provider.capturePayment(payment_id, { amount: 1_000, currency: "INR" }));
    await waitFor(() => receiver.received.length === 3, 5_000, "all three");
    expect(receiver.received.map((webhook) => webhook.event)).toEqual(["payment.authorized", "order.paid", "payment.captured"]);
  });

  it("late: a delayed event arrives after later ones", async () => {
    const sim = await simulatorWithWebhooks();
    sim.simulator.faults.set({ webhook_late_next: 1, webhook_late_ms: 300 });
    await purchase(sim, "rsv_late");
    await waitFor(() => receiver.received.length === 3, 5_000, "all three");
    expect(receiver.received.map((webhook) => webhook.event)).toEqual(["payment.captured", "order.paid", "payment.authorized"]);
  });

  it("drop: the event is never sent; redelivery under a new event id sends the same signed bytes", async () => {
    const sim = await simulatorWithWebhooks(false);
    sim.simulator.faults.set({ webhook_drop_next: 1 });
    const order = expectOk(await sim.provider().createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_drop" }));
    await pay(sim.base_url, order.id);
    expect(await sim.simulator.deliverWebhooksNow()).toEqual({ attempted: 0, delivered: 0, failed: 0 });
    const [dropped] = sim.simulator.state.outbox();
    expect(dropped!.state).toBe("dropped");
    const again = sim.simulator.redeliverWebhook(dropped!.event_id, { new_event_id: true });
    expect(again!.event_id).not.toBe(dropped!.event_id);
    await sim.simulator.deliverWebhooksNow();
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]!.event_id).toBe(again!.event_id);
    expect(receiver.received[0]!.raw.toString("utf8")).toBe(dropped!.body);
    expect(receiver.received[0]!.signature).toBe(dropped!.signature);
  });

  it("over HTTP: set a knob, list the outbox, deliver, redeliver under the same id", async () => {
    const sim = await simulatorWithWebhooks(false);
    const json = { "content-type": "application/json" };
    await fetch(`${sim.base_url}/sim/faults`, { method: "POST", headers: json, body: JSON.stringify({ webhook_duplicate_next: 1 }) });
    const order = expectOk(await sim.provider().createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_http" }));
    await pay(sim.base_url, order.id);
    const outbox = (await (await fetch(`${sim.base_url}/sim/webhooks`)).json()) as { items: Array<{ event_id: string; state: string }> };
    expect(outbox.items).toHaveLength(1);
    const delivered = await (await fetch(`${sim.base_url}/sim/webhooks/deliver`, { method: "POST" })).json();
    expect(delivered).toEqual({ attempted: 2, delivered: 1, failed: 0 });
    const event_id = outbox.items[0]!.event_id;
    const redelivered = await fetch(`${sim.base_url}/sim/webhooks/redeliver`, { method: "POST", headers: json, body: JSON.stringify({ event_id }) });
    expect(await redelivered.json()).toMatchObject({ event_id, state: "pending" });
    await fetch(`${sim.base_url}/sim/webhooks/deliver`, { method: "POST" });
    expect(receiver.received.map((webhook) => webhook.event_id)).toEqual([event_id, event_id, event_id]);
  });
});
