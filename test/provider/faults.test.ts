// Each fault knob turns the client's answer into `unknown` (never `refused`, never a throw), set
// in-process and over HTTP; "after processing" faults leave the effect in place for reconciliation.
// An authorization can be made to run out (POST /sim/payments/{id}/expire), as Razorpay refunds one
// never captured.

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { expectOk, pay, startSimulator, type RunningSimulator } from "./support.js";
import { waitUntil } from "../support/wait.js";

let sim: RunningSimulator;
const timeout_ms = 300;

beforeAll(async () => {
  sim = await startSimulator({ auto_deliver: false });
});
afterEach(() => {
  sim.simulator.faults.reset();
});
afterAll(async () => {
  await sim.close();
});

const provider = () => sim.provider({ timeout_ms });
const order = (receipt: string) => provider().createOrder({ amount: 10_000, currency: "INR", receipt });

describe("request faults make the outcome unknown", () => {
  it("next N 5xx: the Nth+1 request succeeds", async () => {
    sim.simulator.faults.set({ error_5xx_next: 2 });
    expect(await order("rsv_5xx_a")).toEqual({ kind: "unknown", reason: "HTTP 500 from provider" });
    expect(await order("rsv_5xx_b")).toMatchObject({ kind: "unknown" });
    expect(await order("rsv_5xx_c")).toMatchObject({ kind: "ok" });
    expect(sim.simulator.faults.get().error_5xx_next).toBe(0);
  });

  it("a 5xx before processing created nothing", async () => {
    sim.simulator.faults.set({ error_5xx_next: 1, error_5xx_status: 503 });
    expect(await order("rsv_5xx_nothing")).toEqual({ kind: "unknown", reason: "HTTP 503 from provider" });
    expect(expectOk(await provider().findOrdersByReceipt("rsv_5xx_nothing"))).toEqual([]);
  });

  it("a 5xx rate strikes exactly every 1/rate-th request", async () => {
    sim.simulator.faults.set({ error_5xx_rate: 0.5 });
    const kinds: string[] = [];
    for (let index = 0; index < 6; index++) kinds.push((await provider().findOrdersByReceipt("rsv_rate")).kind);
    expect(kinds).toEqual(["ok", "unknown", "ok", "unknown", "ok", "unknown"]);
  });

  it("timeout: the request hangs and the client gives up after its timeout", async () => {
    sim.simulator.faults.set({ timeout_next: 1 });
    const asked_before = sim.simulator.state.apiRequests();
    const outcome = await order("rsv_timeout");
    // Only the client's own timeout (an AbortSignal.timeout firing) gives this reason: the
    // simulator neither answered nor cut the connection.
    expect(outcome).toEqual({ kind: "unknown", reason: `no answer within ${timeout_ms} ms` });
    // The request did reach the simulator, and the knob struck it (hanging before it took effect).
    expect(sim.simulator.state.apiRequests()).toBe(asked_before + 1);
    expect(sim.simulator.faults.get().timeout_next).toBe(0);
    expect(expectOk(await provider().findOrdersByReceipt("rsv_timeout"))).toEqual([]);
    expect(await order("rsv_timeout_after")).toMatchObject({ kind: "ok" });
  });

  it("connection reset: the socket is destroyed and the outcome is unknown", async () => {
    sim.simulator.faults.set({ reset_next: 1 });
    const outcome = await order("rsv_reset");
    expect(outcome.kind).toBe("unknown");
    if (outcome.kind === "unknown") expect(outcome.reason).toMatch(/^connection failed/);
    expect(await order("rsv_reset_after")).toMatchObject({ kind: "ok" });
  });

  it("latency beyond the client timeout is a timeout", async () => {
    // Deterministic, not a race: client and simulator share this process's timers, and the
    // client's timeout is armed before the request is sent, the latency only once it arrives.
    sim.simulator.faults.set({ latency_ms: timeout_ms + 200 });
    expect(await order("rsv_slow")).toEqual({ kind: "unknown", reason: `no answer within ${timeout_ms} ms` });
  });

  it("latency is restricted by only_routes as every request fault is", async () => {
    // An order creation held past the client's timeout; a lookup by receipt, held as long, would time out too.
    sim.simulator.faults.set({ latency_ms: timeout_ms + 200, only_routes: ["POST /v1/orders"] });
    expect(await order("rsv_latency_only")).toMatchObject({ kind: "unknown" });
    expect(await provider().findOrdersByReceipt("rsv_latency_elsewhere")).toMatchObject({ kind: "ok" });
  });

  it("latency holds a request before it takes effect, then it succeeds", async () => {
    // Without latency, a request takes effect in the same turn it is counted in, so "arrived but
    // not yet processed" is never observable; with latency it is, for latency_ms. The latency is
    // generous only so the check right after arrival cannot miss that window on a loaded machine;
    // the client's timeout is far above it so the client never gives up first.
    sim.simulator.faults.set({ latency_ms: 1_000 });
    const asked_before = sim.simulator.state.apiRequests();
    const created = sim.provider({ timeout_ms: 30_000 }).createOrder({ amount: 10_000, currency: "INR", receipt: "rsv_slow_ok" });
    await waitUntil("the order request to reach the simulator", () => sim.simulator.state.apiRequests() > asked_before, { interval_ms: 1 });
    expect(sim.simulator.state.orders().filter((held) => held.receipt === "rsv_slow_ok")).toEqual([]);
    expect(await created).toMatchObject({ kind: "ok" });
    expect(sim.simulator.state.orders().filter((held) => held.receipt === "rsv_slow_ok")).toHaveLength(1);
  });

  it("close() cuts a hung request at once, so a server can shut down", async () => {
    const own = await startSimulator();
    try {
      own.simulator.faults.set({ timeout_next: 1 });
      const pending = own.provider({ timeout_ms: 10_000 }).findOrdersByReceipt("rsv_hung");
      // The request hangs from the turn it is counted in (no latency is set): wait for that.
      await waitUntil("the request to reach the simulator and hang", () => own.simulator.state.apiRequests() === 1);
      expect(own.simulator.faults.get().timeout_next).toBe(0);
      await own.simulator.close();
      // Cut by close(), not by the client's timeout, which would say "no answer within 10000 ms".
      const outcome = await pending;
      expect(outcome.kind).toBe("unknown");
      if (outcome.kind === "unknown") expect(outcome.reason).toMatch(/^connection failed/);
    } finally {
      await own.app.close();
    }
  });

  it("a refused connection (nothing listening) is unknown, not refused", async () => {
    const closed = sim.provider({ base_url: "http://127.0.0.1:1", timeout_ms });
    expect(await closed.fetchOrder("order_Anything1")).toMatchObject({ kind: "unknown" });
  });
});

describe("faults after processing", () => {
  it("an order created before a timeout is found by its receipt", async () => {
    sim.simulator.faults.set({ timeout_next: 1, after_processing: true });
    expect(await order("rsv_lost_answer")).toMatchObject({ kind: "unknown" });
    const found = expectOk(await provider().findOrdersByReceipt("rsv_lost_answer"));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ receipt: "rsv_lost_answer", amount: 10_000, status: "created" });
  });

  it("a 400 or a 429 strikes before the request takes effect, whatever after_processing says: Razorpay refuses without acting", async () => {
    for (const [knob, status] of [["error_4xx_next", 400], ["rate_limit_next", 429]] as const) {
      const receipt = `rsv_refused_${status}`;
      sim.simulator.faults.set({ [knob]: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
      expect(await order(receipt)).toMatchObject({ kind: "refused", status });
      expect(expectOk(await provider().findOrdersByReceipt(receipt))).toEqual([]);
    }
  });

  it("a capture whose answer is reset still captured: fetchPayment proves it", async () => {
    const created = expectOk(await order("rsv_capture_reset"));
    const paid = await pay(sim.base_url, created.id);
    const payment_id = paid.body.razorpay_payment_id as string;
    sim.simulator.faults.set({ reset_next: 1, after_processing: true, only_routes: ["POST /v1/payments/:id/capture"] });
    // The fetch before it is not struck: only the capture route is.
    expect(expectOk(await provider().fetchPayment(payment_id)).status).toBe("authorized");
    expect(await provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" })).toMatchObject({ kind: "unknown" });
    expect(expectOk(await provider().fetchPayment(payment_id))).toMatchObject({ status: "captured", captured: true });
  });
});

describe("fault knobs over HTTP", () => {
  it("POST /sim/faults sets, GET reads, DELETE resets", async () => {
    const set = await fetch(`${sim.base_url}/sim/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ error_5xx_next: 1, only_routes: ["GET /v1/orders/:id"] }),
    });
    expect(set.status).toBe(200);
    expect(await set.json()).toMatchObject({ error_5xx_next: 1, only_routes: ["GET /v1/orders/:id"] });
    const created = expectOk(await order("rsv_http_knob"));
    expect(await provider().fetchOrder(created.id)).toMatchObject({ kind: "unknown" });
    expect(await provider().fetchOrder(created.id)).toMatchObject({ kind: "ok" });
    await fetch(`${sim.base_url}/sim/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"latency_ms": 5}' });
    const reset = await fetch(`${sim.base_url}/sim/faults`, { method: "DELETE" });
    expect(await reset.json()).toMatchObject({ latency_ms: 0, only_routes: [] });
  });

  it("an unknown or out-of-range knob is a 400 naming it", async () => {
    for (const body of ['{"explode": 1}', '{"error_5xx_rate": 2}', '{"timeout_next": -1}']) {
      const response = await fetch(`${sim.base_url}/sim/faults`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: { code: "BAD_REQUEST_ERROR" } });
    }
  });

  it("in-process set() validates too", () => {
    expect(() => sim.simulator.faults.set({ error_5xx_next: 1.5 })).toThrow();
  });
});

/** POST /sim/payments/{id}/{action}: the simulator's payment controls. */
async function paymentControl(action: "expire" | "refund", payment_id: string) {
  const response = await fetch(`${sim.base_url}/sim/payments/${payment_id}/${action}`, { method: "POST" });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe("an authorization that runs out", () => {
  const expire = (payment_id: string) => paymentControl("expire", payment_id);

  it("POST /sim/payments/{id}/expire refunds an authorized payment uncaptured; it can no longer be captured", async () => {
    const created = expectOk(await order("rsv_expire"));
    const payment_id = (await pay(sim.base_url, created.id)).body.razorpay_payment_id as string;
    const expired = await expire(payment_id);
    expect(expired).toMatchObject({ status: 200, body: { id: payment_id, status: "refunded", captured: false, amount_refunded: 10_000, refund_status: "full" } });
    expect(expectOk(await provider().fetchPayment(payment_id))).toMatchObject({ status: "refunded", captured: false });
    expect(await provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" })).toMatchObject({
      kind: "refused",
      error: { description: "Only payments which have been authorized and not yet captured can be captured" },
    });
    expect(expectOk(await provider().fetchOrder(created.id))).toMatchObject({ status: "attempted", amount_paid: 0 });
  });

  it("only an authorized payment expires: a captured or refunded one, or an unknown id, is a 400", async () => {
    const created = expectOk(await order("rsv_expire_refused"));
    const payment_id = (await pay(sim.base_url, created.id)).body.razorpay_payment_id as string;
    expectOk(await provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" }));
    expect(await expire(payment_id)).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST_ERROR" } } });
    expect(sim.simulator.state.payment(payment_id)).toMatchObject({ status: "captured", captured: true, amount_refunded: 0, refund_status: null });
    expect(await expire("pay_00000000000999")).toMatchObject({ status: 400, body: { error: { description: "The id provided does not exist" } } });
  });
});

describe("a captured payment the merchant refunds", () => {
  const refund = (payment_id: string) => paymentControl("refund", payment_id);

  it("POST /sim/payments/{id}/refund refunds a captured payment in full: refunded, still captured: true; the order stays paid", async () => {
    const created = expectOk(await order("rsv_refund"));
    const payment_id = (await pay(sim.base_url, created.id)).body.razorpay_payment_id as string;
    expectOk(await provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" }));
    expect(await refund(payment_id)).toMatchObject({ status: 200, body: { id: payment_id, status: "refunded", captured: true, amount_refunded: 10_000, refund_status: "full" } });
    expect(expectOk(await provider().fetchPayment(payment_id))).toMatchObject({ status: "refunded", captured: true });
    expect(expectOk(await provider().fetchOrder(created.id))).toMatchObject({ status: "paid", amount_paid: 10_000 });
  });

  it("only a captured payment is refunded: an authorized or already refunded one, or an unknown id, is a 400", async () => {
    const created = expectOk(await order("rsv_refund_refused"));
    const payment_id = (await pay(sim.base_url, created.id)).body.razorpay_payment_id as string;
    const refused = { status: 400, body: { error: { code: "BAD_REQUEST_ERROR", description: "Only a captured payment that has not been refunded can be refunded here" } } };
    expect(await refund(payment_id)).toMatchObject(refused);
    expectOk(await provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" }));
    expect((await refund(payment_id)).status).toBe(200);
    expect(await refund(payment_id)).toMatchObject(refused);
    expect(await refund("pay_00000000000999")).toMatchObject({ status: 400, body: { error: { description: "The id provided does not exist" } } });
  });
});
