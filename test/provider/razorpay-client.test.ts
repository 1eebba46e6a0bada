// The real razorpay client against the simulator over loopback HTTP: orders, checkout, capture,
// Razorpay's refusals, local id refusals and configuration checks.

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProviderOrder, ProviderPayment } from "../../src/provider/port.js";
import { isOrderId, isPaymentId } from "../../src/provider/port.js";
import { response_body_max_bytes } from "../../src/provider/razorpay/client.js";
import { createRazorpayProvider } from "../../src/provider/razorpay/index.js";
import { acceptOnlyKey } from "../../src/provider/simulator/index.js";
import { provider_notes_max, provider_text_chars_max } from "../../src/provider/razorpay/transformers.js";
import { canonicalJson } from "../../src/evidence/canonical.js";
import { expectOk, key_id, key_secret, pay, startScriptedProvider, startSimulator, wireOrder, type RunningSimulator } from "./support.js";

let sim: RunningSimulator;

beforeAll(async () => {
  sim = await startSimulator({ auto_deliver: false });
});
afterAll(async () => {
  await sim.close();
});

async function authorizedPayment(amount = 50_000): Promise<{ order: ProviderOrder; payment_id: string }> {
  const order = expectOk(await sim.provider().createOrder({ amount, currency: "INR", receipt: `rsv_${amount}_${Math.random().toString(36).slice(2, 8)}` }));
  const paid = await pay(sim.base_url, order.id);
  expect(paid.status).toBe(200);
  return { order, payment_id: paid.body.razorpay_payment_id };
}

describe("orders", () => {
  it("creates an order with manual capture and the receipt, and fetches it back", async () => {
    const provider = sim.provider();
    const order = expectOk(
      await provider.createOrder({ amount: 50_000, currency: "inr", receipt: "rsv_create_1", notes: { buyer_receipt: "book #1" } }),
    );
    expect(order).toMatchObject({ amount: 50_000, amount_paid: 0, currency: "INR", receipt: "rsv_create_1", status: "created" });
    expect(order.notes).toEqual({ buyer_receipt: "book #1" });
    expect(isOrderId(order.id)).toBe(true);
    expect(expectOk(await provider.fetchOrder(order.id))).toEqual(order);
  });

  it("finds orders by receipt, newest first, and an empty list for an unknown receipt", async () => {
    const provider = sim.provider();
    const first = expectOk(await provider.createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_find_1" }));
    const second = expectOk(await provider.createOrder({ amount: 2_000, currency: "INR", receipt: "rsv_find_1" }));
    expect(expectOk(await provider.findOrdersByReceipt("rsv_find_1")).map((order) => order.id)).toEqual([second.id, first.id]);
    expect(expectOk(await provider.findOrdersByReceipt("rsv_nobody"))).toEqual([]);
  });

  it("sends payment.capture manual, so a paid order only authorizes", async () => {
    const { order, payment_id } = await authorizedPayment();
    const payment = expectOk(await sim.provider().fetchPayment(payment_id));
    expect(payment).toMatchObject({ order_id: order.id, amount: 50_000, currency: "INR", status: "authorized", captured: false });
    expect(expectOk(await sim.provider().fetchOrder(order.id)).status).toBe("attempted");
  });

  it("refuses an order below the minimum amount with Razorpay's error body", async () => {
    const outcome = await sim.provider().createOrder({ amount: 99, currency: "INR", receipt: "rsv_small" });
    expect(outcome).toEqual({
      kind: "refused",
      status: 400,
      error: { code: "BAD_REQUEST_ERROR", description: "The amount must be atleast INR 1.00", field: "amount" },
    });
  });

  it("refuses an unknown order id as Razorpay does (400, id does not exist)", async () => {
    const outcome = await sim.provider().fetchOrder("order_DoesNotExist1");
    expect(outcome).toMatchObject({ kind: "refused", status: 400, error: { description: "The id provided does not exist" } });
  });
});

describe("capture", () => {
  it("captures the authorized amount, then refuses a second capture", async () => {
    const { order, payment_id } = await authorizedPayment(70_000);
    const provider = sim.provider();
    const captured: ProviderPayment = expectOk(await provider.capturePayment(payment_id, { amount: 70_000, currency: "INR" }));
    expect(captured).toMatchObject({ id: payment_id, status: "captured", captured: true, amount: 70_000 });
    expect(expectOk(await provider.fetchOrder(order.id))).toMatchObject({ status: "paid", amount_paid: 70_000 });
    const again = await provider.capturePayment(payment_id, { amount: 70_000, currency: "INR" });
    expect(again).toMatchObject({ kind: "refused", status: 400, error: { description: "This payment has already been captured" } });
  });

  it("refuses a capture for another amount or currency, and the payment stays authorized", async () => {
    const { payment_id } = await authorizedPayment(30_000);
    const provider = sim.provider();
    const wrong_amount = await provider.capturePayment(payment_id, { amount: 30_001, currency: "INR" });
    expect(wrong_amount).toMatchObject({
      kind: "refused",
      status: 400,
      error: { code: "BAD_REQUEST_ERROR", description: "Capture amount must be equal to the amount authorized", field: "amount" },
    });
    const wrong_currency = await provider.capturePayment(payment_id, { amount: 30_000, currency: "USD" });
    expect(wrong_currency).toMatchObject({ kind: "refused", error: { description: "Capture request currency must be same as payment currency" } });
    expect(expectOk(await provider.fetchPayment(payment_id)).status).toBe("authorized");
  });

  it("a declining card gives a failed payment that cannot be captured", async () => {
    const order = expectOk(await sim.provider().createOrder({ amount: 10_000, currency: "INR", receipt: "rsv_decline" }));
    const declined = await pay(sim.base_url, order.id, "4000000000000002");
    expect(declined.status).toBe(400);
    const payment_id = declined.body.error.metadata.payment_id as string;
    expect(isPaymentId(payment_id)).toBe(true);
    const payment = expectOk(await sim.provider().fetchPayment(payment_id));
    expect(payment).toMatchObject({ status: "failed", captured: false, error_code: "BAD_REQUEST_ERROR" });
    const capture = await sim.provider().capturePayment(payment_id, { amount: 10_000, currency: "INR" });
    expect(capture).toMatchObject({
      kind: "refused",
      error: { description: "Only payments which have been authorized and not yet captured can be captured" },
    });
  });

  it("the checkout refuses a number that is not a card", async () => {
    const order = expectOk(await sim.provider().createOrder({ amount: 10_000, currency: "INR", receipt: "rsv_badcard" }));
    const answer = await pay(sim.base_url, order.id, "4111111111111112");
    expect(answer.status).toBe(400);
    expect(answer.body.error.field).toBe("card");
  });
});

describe("authentication", () => {
  it("a key the account does not know is refused with a Razorpay 401 body; to a lookup that is no answer about the order", async () => {
    const strict = await startSimulator({ accept_key: (id, secret) => id === key_id && secret === key_secret });
    try {
      const wrong = strict.provider({ key_secret: "wrong" });
      const created = await wrong.createOrder({ amount: 5000, currency: "INR", receipt: "rsv_bad_key" });
      expect(created).toMatchObject({ kind: "refused", status: 401, error: { description: "The api key provided is invalid" } });
      // "Not found" would be wrong: the provider said nothing about the order.
      const outcome = await wrong.fetchOrder("order_Anything1");
      expect(outcome).toEqual({ kind: "unknown", reason: "HTTP 401 from provider: The api key provided is invalid" });
      expect(await strict.provider().findOrdersByReceipt("rsv_any")).toMatchObject({ kind: "ok" });
    } finally {
      await strict.close();
    }
  });

  it("acceptOnlyKey accepts its one key and refuses another id, another secret, and a prefix or extension of the secret", () => {
    const accept = acceptOnlyKey("rzp_test_own", "s3cret-value");
    expect(accept("rzp_test_own", "s3cret-value")).toBe(true);
    for (const [id, secret] of [
      ["rzp_test_other", "s3cret-value"],
      ["rzp_test_own", "s3cret-valuf"],
      ["rzp_test_own", "s3cret"],
      ["rzp_test_own", "s3cret-value-and-more"],
      ["rzp_test_own", ""],
    ] as const) {
      expect([id, secret, accept(id, secret)]).toEqual([id, secret, false]);
    }
  });

  it("a request without Basic auth gets 401", async () => {
    const response = await fetch(`${sim.base_url}/v1/orders`, { method: "GET" });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: "BAD_REQUEST_ERROR" } });
  });
});

describe("create-order validation in the simulator", () => {
  const auth = `Basic ${Buffer.from(`${key_id}:${key_secret}`).toString("base64")}`;
  const post = async (body: unknown) => {
    const response = await fetch(`${sim.base_url}/v1/orders`, {
      method: "POST",
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as { error?: { description: string; field?: string } } };
  };

  it.each([
    [{ amount: 1_000, currency: "INR", transfers: [{ account: "acc_x", amount: 1_000 }] }, "transfers is/are not required and should not be sent"],
    [{ amount: 1_000, currency: "INR", partial_payment: true }, "partial_payment is/are not required and should not be sent"],
    [{ amount: "1000", currency: "INR" }, "The amount must be an integer."],
    [{ currency: "INR" }, "The amount field is required."],
    [{ amount: 1_000 }, "The currency field is required."],
    [{ amount: 1_000, currency: "ZZZ" }, "The currency is invalid."],
    [{ amount: 1_000, currency: "INR", receipt: "r".repeat(41) }, "The receipt may not be greater than 40 characters."],
    [{ amount: 1_000, currency: "INR", notes: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v"])) }, "Number of fields in notes should be less than or equal to 15"],
    [{ amount: 1_000, currency: "INR", payment: { capture: "later" } }, "The selected payment.capture is invalid."],
  ])("refuses %j", async (body, description) => {
    const answer = await post(body);
    expect(answer.status).toBe(400);
    expect(answer.body.error?.description).toBe(description);
  });

  it("an automatic-capture order (not Bursar's) captures at checkout", async () => {
    const created = await post({ amount: 1_000, currency: "INR", payment: { capture: "automatic" } });
    const order_id = (created.body as unknown as { id: string }).id;
    const paid = await pay(sim.base_url, order_id);
    expect(paid.body.payment).toMatchObject({ status: "captured", captured: true });
    expect(expectOk(await sim.provider().fetchOrder(order_id)).status).toBe("paid");
  });

  it("accepts a 40-character receipt and 15 notes (the limits themselves)", async () => {
    const notes = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, "v"]));
    const answer = await post({ amount: 1_000, currency: "INR", receipt: "r".repeat(40), notes });
    expect(answer.status).toBe(200);
  });
});

describe("ids from agents are refused locally", () => {
  it.each(["pay_x/../../orders", "pay_", "pay_abc?x=1", "order_abc", "pay_" + "a".repeat(41), "pay_abc%2F"])(
    "capture/fetch of %j sends no request",
    async (payment_id) => {
      const provider = sim.provider();
      const before = sim.requests();
      const capture = await provider.capturePayment(payment_id, { amount: 100, currency: "INR" });
      const fetched = await provider.fetchPayment(payment_id);
      expect(capture).toMatchObject({ kind: "refused", status: 400, local: true, error: { field: "payment_id" } });
      expect(fetched).toMatchObject({ kind: "refused", status: 400, local: true });
      expect(sim.requests()).toBe(before);
    },
  );

  it("an order id with a path in it sends no request", async () => {
    const before = sim.requests();
    expect(await sim.provider().fetchOrder("order_x/../../payments")).toMatchObject({ kind: "refused", local: true });
    expect(sim.requests()).toBe(before);
  });
});

describe("answers that are too large", () => {
  it("an answer over the limit without Content-Length is cut off and unknown, not read whole", async () => {
    // A real loopback server that streams a chunked 2 MiB JSON string, then holds the connection open.
    const server = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write('"');
      for (let i = 0; i < 32; i++) response.write("x".repeat(64 * 1024));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      // Read whole, the answer would never end: the call would end at the timeout instead.
      const provider = createRazorpayProvider({ key_id, key_secret, base_url: `http://127.0.0.1:${port}`, timeout_ms: 3_000 });
      const outcome = await provider.fetchOrder("order_Big1");
      expect(outcome).toMatchObject({ kind: "unknown", reason: expect.stringContaining(`over ${response_body_max_bytes} bytes`) });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("answers from a broken or hostile provider", () => {
  const order_json = (fields: Parameters<typeof wireOrder>[0]) => ({ status: 200, json: JSON.stringify(wireOrder(fields)) });
  const payment_json = (id: string, order_id: string) =>
    JSON.stringify({ id, entity: "payment", amount: 500, currency: "INR", status: "authorized", order_id, captured: false, created_at: 1_700_000_000 });

  it("text with lone surrogates or past the length limit is made representable: a refusal stays a refusal that evidence can hold", async () => {
    const long = "d".repeat(5_000);
    const hostile = await startScriptedProvider((_method, path) =>
      path === "/v1/orders"
        ? { status: 400, json: `{"error":{"code":"BAD_REQUEST_ERROR","description":"nope \\ud800 here ${long}","field":"x\\udc00"}}` }
        : { status: 200, json: `{"id":"order_Notes1","entity":"order","amount":500,"currency":"INR","receipt":"r\\ud800","status":"created","notes":{"k\\ud800":"v\\udc00"},"created_at":1}` },
    );
    try {
      const refused = await hostile.provider().createOrder({ amount: 500, currency: "INR", receipt: "rsv_1" });
      expect(refused.kind).toBe("refused");
      const error = (refused as { error: { description: string; field: string } }).error;
      expect(error.description.startsWith("nope \ufffd here ddd")).toBe(true);
      expect(error.description).toHaveLength(provider_text_chars_max + 1);
      expect(error.field).toBe("x\ufffd");
      expect(() => canonicalJson(refused)).not.toThrow();
      const order = expectOk(await hostile.provider().fetchOrder("order_Notes1"));
      expect(order).toMatchObject({ receipt: "r\ufffd", notes: { "k\ufffd": "v\ufffd" } });
    } finally {
      await hostile.close();
    }
  });

  it("an order with more notes than Razorpay could hold is no answer", async () => {
    const notes = Object.fromEntries(Array.from({ length: provider_notes_max + 1 }, (_, i) => [`n${i}`, "x"]));
    const hostile = await startScriptedProvider(() => order_json({ id: "order_Many1", amount: 500, receipt: "rsv_1", notes }));
    try {
      expect(await hostile.provider().fetchOrder("order_Many1")).toMatchObject({ kind: "unknown", reason: expect.stringContaining(`more than ${provider_notes_max} notes`) });
    } finally {
      await hostile.close();
    }
  });

  it("an answer about another order, payment or receipt than the one asked for is unknown", async () => {
    const hostile = await startScriptedProvider((method, path) => {
      if (method === "POST") return order_json({ id: "order_Other1", amount: 500, receipt: "rsv_someone_else" });
      if (path === "/v1/orders/order_Mine1") return order_json({ id: "order_Other1", amount: 500, receipt: "rsv_other" });
      if (path === "/v1/payments/pay_Mine1") return { status: 200, json: payment_json("pay_Other1", "order_Mine1") };
      if (path === "/v1/orders/order_Mine1/payments") return { status: 200, json: `{"entity":"collection","count":1,"items":[${payment_json("pay_Other1", "order_Other1")}]}` };
      return { status: 200, json: JSON.stringify({ entity: "collection", count: 1, items: [wireOrder({ id: "order_Other1", amount: 500, receipt: "rsv_other" })] }) };
    });
    try {
      const provider = hostile.provider();
      const answers = [
        await provider.createOrder({ amount: 500, currency: "INR", receipt: "rsv_mine" }),
        await provider.fetchOrder("order_Mine1"),
        await provider.fetchPayment("pay_Mine1"),
        await provider.fetchOrderPayments("order_Mine1"),
        await provider.findOrdersByReceipt("rsv_mine"),
      ];
      for (const answer of answers) expect(answer).toMatchObject({ kind: "unknown", reason: expect.stringMatching(/^the provider answered about /) });
      expect((answers[1] as { reason: string }).reason).toBe("the provider answered about order order_Other1 when asked for order_Mine1");
    } finally {
      await hostile.close();
    }
  });
});

describe("configuration", () => {
  it("refuses a live key unless allow_live", () => {
    expect(() => createRazorpayProvider({ key_id: "rzp_live_Abc", key_secret: "s" })).toThrow(/BURSAR_ALLOW_LIVE/);
    expect(createRazorpayProvider({ key_id: "rzp_live_Abc", key_secret: "s", allow_live: true }).name).toBe("razorpay");
  });

  it("refuses a key that is not a Razorpay key id, naming RAZORPAY_KEY_ID", () => {
    expect(() => createRazorpayProvider({ key_id: "sk_test_123", key_secret: "s" })).toThrow(/RAZORPAY_KEY_ID/);
    expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "" })).toThrow(/RAZORPAY_KEY_SECRET/);
    expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", base_url: "ftp://x" })).toThrow(/RAZORPAY_BASE_URL/);
  });

  it("refuses a base URL with user:password@, naming RAZORPAY_BASE_URL without the password", () => {
    for (const base_url of ["https://user:hunter2@api.razorpay.com", "http://:hunter2@127.0.0.1:8788", "http://user@127.0.0.1:8788"]) {
      expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", base_url })).toThrow(/^RAZORPAY_BASE_URL: a URL with user:password@ is refused/);
      expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", base_url })).not.toThrow(/hunter2/);
    }
  });

  it("refuses a base URL ending in /v1 (the address Razorpay's pages give), since every path already starts /v1", () => {
    for (const base_url of ["https://api.razorpay.com/v1", "https://api.razorpay.com/v1/", "http://127.0.0.1:8788/V1"]) {
      expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", base_url })).toThrow(
        `RAZORPAY_BASE_URL=${JSON.stringify(base_url)}: ends in /v1, which the client adds to every path (/v1/orders); give the base without it, e.g. https://api.razorpay.com`,
      );
    }
    // A path of its own (a proxy, the simulator bursar serve mounts) is a base like any other.
    for (const base_url of ["http://127.0.0.1:8787/simulator", "https://proxy.example/razorpay/v1beta", "https://proxy.example/v1/razorpay"]) {
      expect(createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", base_url }).name).toBe("razorpay");
    }
  });

  it("refuses a key secret or webhook secret of only whitespace, naming the variable", () => {
    expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "   " })).toThrow(/RAZORPAY_KEY_SECRET/);
    expect(() => createRazorpayProvider({ key_id: "rzp_test_A", key_secret: "s", webhook_secret: " " })).toThrow(/RAZORPAY_WEBHOOK_SECRET: only whitespace/);
  });

  it("the error is a ConfigError and does not echo the key", () => {
    try {
      createRazorpayProvider({ key_id: "rzp_live_SecretLooking", key_secret: "s" });
      expect.unreachable();
    } catch (error) {
      expect((error as Error).name).toBe("ConfigError");
      expect((error as Error).message).not.toContain("SecretLooking");
    }
  });
});

describe("a request that fails before any answer", () => {
  const password = "hunter2-in-the-message";
  /** A provider whose every request fails as `fetch` does here. */
  const failing = (fetch: () => Promise<Response>) =>
    createRazorpayProvider({ key_id, key_secret, base_url: "http://127.0.0.1:1", timeout_ms: 2_000, fetch: fetch as typeof globalThis.fetch });

  it("names the failure by its error code, never by the error's message (which reaches the agent and the evidence log)", async () => {
    const cases: Array<{ error: Error; reason: string }> = [
      // What fetch throws for a URL with credentials: the message repeats the URL, password included.
      { error: new TypeError(`Request cannot be constructed from a URL that includes credentials: http://u:${password}@127.0.0.1:1/v1/orders`), reason: "connection failed (no error code)" },
      { error: Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error(`connect ECONNREFUSED ${password}`), { code: "ECONNREFUSED" }) }), reason: "connection failed (ECONNREFUSED)" },
      { error: Object.assign(new TypeError("fetch failed"), { cause: new Error(`proxy said: ${password}`) }), reason: "connection failed (no error code)" },
      { error: Object.assign(new TypeError("fetch failed"), { cause: { code: `EVIL ${password}` } }), reason: "connection failed (no error code)" },
    ];
    for (const { error, reason } of cases) {
      const outcome = await failing(() => Promise.reject(error)).fetchOrder("order_Anything1");
      expect(outcome).toEqual({ kind: "unknown", reason });
      expect(canonicalJson(outcome)).not.toContain(password);
    }
  });

  it("a timeout is still named by its limit", async () => {
    const outcome = await failing(() => Promise.reject(new DOMException("The operation was aborted due to timeout", "TimeoutError"))).fetchOrder("order_Anything1");
    expect(outcome).toEqual({ kind: "unknown", reason: "no answer within 2000 ms" });
  });
});

describe("the request timeout", () => {
  it("an answered request's timeout is cancelled, not left to fire later", async () => {
    const signals: AbortSignal[] = [];
    const watched = ((input: string, init: RequestInit) => {
      signals.push(init.signal as AbortSignal);
      return fetch(input, init);
    }) as typeof globalThis.fetch;
    // Far above a loopback answer's time, so that the order is answered on a loaded machine too.
    const timeout_ms = 1_000;
    const provider = sim.provider({ timeout_ms, fetch: watched });
    expectOk(await provider.createOrder({ amount: 50_000, currency: "INR", receipt: "rsv_timer_1" }));
    await new Promise((resolve) => setTimeout(resolve, timeout_ms + 300));
    expect(signals.map((signal) => signal.aborted)).toEqual([false]);
  });
});
