// A lookup refused for a reason that says nothing about the order or payment (429 rate limit,
// 401 key) is an unknown answer, not "no such order". Razorpay documents 429 as "retry with
// backoff" (https://razorpay.com/docs/api/pagination, Rate Limiter) and sends every error in its
// {error:{code,description,…}} envelope, so the client reads it as a refusal; taken as a lookup's
// answer it consumed a captured payment's webhook, told an operator the order did not exist, and
// told the agent not to retry a capture. A stub Razorpay on loopback serves docs-shaped JSON
// (the simulator has no rate limiter).

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { checkReservation } from "../../src/gate/operator.js";
import { createRazorpayProvider, signWebhookBody } from "../../src/provider/razorpay/index.js";
import { buildServer } from "../../src/server/app.js";
import { webhookRoutes } from "../../src/server/routes/webhooks.js";

const webhook_secret = "whsec_rate_limit_lookups";

/** Razorpay's rate-limit answer: HTTP 429 with the standard error envelope. */
const too_many = {
  error: { code: "BAD_REQUEST_ERROR", description: "Too many requests", source: "NA", step: "NA", reason: "NA", metadata: {} },
};

interface StubOrder {
  id: string;
  amount: number;
  currency: string;
  receipt: string | null;
  created_at: number;
}

/** What each route answers; "ok" serves the real shape, a number answers that status. */
interface Modes {
  create: "ok" | "lost"; // "lost": the order is created, the answer is a 500 (as a timeout would be)
  fetch_order: "ok" | number;
  list_orders: "ok" | number;
  fetch_payment: "ok" | number;
}

function wireOrder(order: StubOrder) {
  // Razorpay's order entity, as its docs show it (notes [] when empty).
  return {
    id: order.id,
    entity: "order",
    amount: order.amount,
    amount_paid: 0,
    amount_due: order.amount,
    currency: order.currency,
    receipt: order.receipt,
    offer_id: null,
    status: "attempted",
    attempts: 1,
    notes: [],
    created_at: order.created_at,
  };
}

async function startStub() {
  const orders: StubOrder[] = [];
  const modes: Modes = { create: "ok", fetch_order: "ok", list_orders: "ok", fetch_payment: "ok" };
  let next = 0;
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://stub");
      if (req.method === "POST" && url.pathname === "/v1/orders") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { amount: number; currency: string; receipt: string };
        const order: StubOrder = { id: `order_Stub${String(++next).padStart(10, "0")}`, amount: body.amount, currency: body.currency, receipt: body.receipt, created_at: 1_790_000_000 };
        orders.push(order);
        if (modes.create === "lost") return send(res, 500, { error: { code: "SERVER_ERROR", description: "The server encountered an error. The incident has been reported to admins.", source: "NA", step: "NA", reason: "NA", metadata: {} } });
        return send(res, 200, wireOrder(order));
      }
      if (req.method === "GET" && url.pathname === "/v1/orders") {
        if (modes.list_orders !== "ok") return send(res, modes.list_orders, modes.list_orders === 429 ? too_many : { error: { code: "SERVER_ERROR", description: "The server encountered an error.", source: "NA", step: "NA", reason: "NA", metadata: {} } });
        const items = orders.filter((order) => order.receipt === url.searchParams.get("receipt")).reverse().map(wireOrder);
        return send(res, 200, { entity: "collection", count: items.length, items });
      }
      const order_match = /^\/v1\/orders\/([^/]+)$/.exec(url.pathname);
      if (req.method === "GET" && order_match) {
        if (modes.fetch_order !== "ok") return send(res, modes.fetch_order, modes.fetch_order === 401 ? bad_key : too_many);
        const order = orders.find((candidate) => candidate.id === order_match[1]);
        return order ? send(res, 200, wireOrder(order)) : send(res, 400, { error: { code: "BAD_REQUEST_ERROR", description: "The id provided does not exist", source: "business", step: "payment_initiation", reason: "input_validation_failed", metadata: {} } });
      }
      if (req.method === "GET" && /^\/v1\/payments\/[^/]+$/.test(url.pathname)) {
        if (modes.fetch_payment !== "ok") return send(res, modes.fetch_payment, too_many);
      }
      return send(res, 404, { error: { code: "BAD_REQUEST_ERROR", description: "The requested URL was not found on the server.", source: "NA", step: "NA", reason: "NA", metadata: {} } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, orders, modes, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Razorpay's answer to a key it does not accept (e.g. after the key was regenerated on the Dashboard). */
const bad_key = {
  error: { code: "BAD_REQUEST_ERROR", description: "The api key provided is invalid", source: "NA", step: "NA", reason: "NA", metadata: {} },
};

/** A payment.captured delivery shaped like Razorpay's docs sample (card). */
function capturedEvent(payment_id: string, order_id: string, amount: number): string {
  return JSON.stringify({
    account_id: "acc_BFQ7uQEaa7j2z7",
    contains: ["payment"],
    created_at: 1_790_000_100,
    entity: "event",
    event: "payment.captured",
    payload: {
      payment: {
        entity: {
          acquirer_data: { auth_code: "828553", rrn: "322206890934" },
          amount,
          amount_refunded: 0,
          amount_transferred: 0,
          bank: null,
          captured: true,
          card_id: "card_DESp9fNnu0RoNc",
          contact: "+919876543210",
          created_at: 1_790_000_050,
          currency: "INR",
          description: null,
          email: "gaurav.kumar@example.com",
          entity: "payment",
          error_code: null,
          error_description: null,
          fee: 200,
          id: payment_id,
          international: false,
          invoice_id: null,
          method: "card",
          notes: [],
          order_id,
          refund_status: null,
          status: "captured",
          tax: 0,
          vpa: null,
          wallet: null,
        },
      },
    },
  });
}

type Stub = Awaited<ReturnType<typeof startStub>>;
let stub: Stub;
let bursar: Bursar;

beforeAll(async () => {
  stub = await startStub();
  const provider = createRazorpayProvider({ key_id: "rzp_test_RateLimitStub", key_secret: "stub-secret", base_url: stub.url, webhook_secret, timeout_ms: 2_000 });
  bursar = await createBursar({ db: ":memory:", provider });
});
afterAll(async () => {
  await bursar.close();
  await stub.close();
});

async function buyer(name: string) {
  const agent = await bursar.operator.createAgent({ name });
  const block = await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000 });
  return { token: agent.token, block_id: block.block_id };
}

/** An order Razorpay created whose answer Bursar never got: the reservation awaits its order. */
async function lostOrder(name: string, amount: number) {
  const { token, block_id } = await buyer(name);
  stub.modes.create = "lost";
  const created = await bursar.gate.callTool(token, "create_order", { amount, currency: "INR" });
  stub.modes.create = "ok";
  expect(created.structuredContent).toMatchObject({ effect: "ALLOW", provider: "unknown" });
  const reservation_id = (created.structuredContent as { reservation_id: string }).reservation_id;
  const order = stub.orders.find((candidate) => candidate.receipt === reservation_id);
  if (!order) throw new Error("the stub did not create the order");
  return { token, block_id, reservation_id, order_id: order.id };
}

describe("Razorpay 429 (rate limited) is read as a definitive answer", () => {
  it("control: with the lookup answered, the same delivery links the order and settles", async () => {
    const { block_id, order_id } = await lostOrder("rl-control", 6_000);
    const app = await buildServer({ logger: false, plugins: [webhookRoutes(bursar.gate.gateContext)] });
    try {
      const raw = capturedEvent("pay_RateLimitCtl01", order_id, 6_000);
      const headers = { "content-type": "application/json", "x-razorpay-signature": signWebhookBody(webhook_secret, raw), "x-razorpay-event-id": "evt_RateLimitCtl01" };
      const answer = await app.inject({ method: "POST", url: "/webhooks/razorpay", headers, payload: raw });
      expect(answer.json()).toMatchObject({ outcome: "applied" });
      expect(await bursar.operator.getBlock(block_id)).toMatchObject({ held: 0, spent: 6_000 });
    } finally {
      await app.close();
    }
  });

  for (const status of [429, 401] as const) {
    it(`webhook: a ${status} on the order lookup must not consume a payment.captured event (503 so Razorpay retries)`, async () => {
      const { block_id, order_id } = await lostOrder(`rl-webhook-${status}`, 10_000);
      const app = await buildServer({ logger: false, plugins: [webhookRoutes(bursar.gate.gateContext)] });
      try {
        const raw = capturedEvent(`pay_RateLimited${status}`, order_id, 10_000);
        const headers = { "content-type": "application/json", "x-razorpay-signature": signWebhookBody(webhook_secret, raw), "x-razorpay-event-id": `evt_RateLimited${status}` };
        stub.modes.fetch_order = status;
        const first = await app.inject({ method: "POST", url: "/webhooks/razorpay", headers, payload: raw });
        stub.modes.fetch_order = "ok";
        // Expected as for any other unanswered lookup (DESIGN: the event id stays unspent, 503).
        expect.soft({ status: first.statusCode, body: first.json() }).toMatchObject({ status: 503 });
        // Razorpay retries the same event id (for up to 24 h): once the lookup answers, it must settle.
        const retry = await app.inject({ method: "POST", url: "/webhooks/razorpay", headers, payload: raw });
        expect.soft(retry.json()).toMatchObject({ outcome: "applied" });
        expect(await bursar.operator.getBlock(block_id)).toMatchObject({ held: 0, spent: 10_000 });
      } finally {
        await app.close();
      }
    });
  }

  for (const status of [429, 503] as const) {
    it(`operator check: a ${status} on GET /v1/orders?receipt= is "unknown", not "the provider has no order"`, async () => {
      const { reservation_id } = await lostOrder(`rl-check-${status}`, 5_000);
      stub.modes.list_orders = status;
      try {
        const checked = await checkReservation(bursar.gate.gateContext, reservation_id);
        expect(checked).toMatchObject({ outcome: "unknown" });
      } finally {
        stub.modes.list_orders = "ok";
      }
    });
  }

  it("capture_payment: a 429 on the payment pre-fetch is transient, so the agent must be told to repeat the call", async () => {
    const { token } = await buyer("rl-capture");
    const created = await bursar.gate.callTool(token, "create_order", { amount: 8_000, currency: "INR" });
    expect(created.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 8_000 } });
    stub.modes.fetch_payment = 429;
    try {
      const captured = await bursar.gate.callTool(token, "capture_payment", { payment_id: "pay_RateLimited002", amount: 8_000, currency: "INR", idempotency_key: "cap-1" });
      const text = (captured.content as Array<{ text: string }>)[0]?.text ?? "";
      expect(text).not.toContain("Do not retry this call unchanged");
    } finally {
      stub.modes.fetch_payment = "ok";
    }
  });
});
