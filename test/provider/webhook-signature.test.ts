// Webhook verification step by step (secret, header, format, signature) over exact raw bytes, and
// parsing of the simulator's own signed events into the port's ParsedWebhook.

import { createHmac } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRazorpayProvider } from "../../src/provider/razorpay/index.js";
import { parseRazorpayWebhook, signWebhookBody, verifyRazorpayWebhook } from "../../src/provider/razorpay/webhook.js";
import { expectOk, key_id, key_secret, pay, startSimulator, webhook_secret, type RunningSimulator } from "./support.js";

const body = Buffer.from('{"entity":"event","event":"payment.captured",  "payload":{}}');
const good = createHmac("sha256", webhook_secret).update(body).digest("hex");

describe("verifyWebhook steps", () => {
  const provider = createRazorpayProvider({ key_id, key_secret, webhook_secret });

  it("a signature over the exact bytes verifies", () => {
    expect(provider.verifyWebhook(body, good)).toEqual({ ok: true });
    expect(provider.verifyWebhook(body, good.toUpperCase())).toEqual({ ok: true });
  });

  it("no secret configured fails closed with 503 before looking at the header", () => {
    const unconfigured = createRazorpayProvider({ key_id, key_secret });
    expect(unconfigured.verifyWebhook(body, good)).toMatchObject({ ok: false, error: { step: "secret", status: 503 } });
  });

  it.each([
    [undefined, "header", "signature_missing"],
    ["", "header", "signature_missing"],
    ["abc", "format", "signature_malformed"],
    ["z".repeat(64), "format", "signature_malformed"],
    [`${good} `, "format", "signature_malformed"],
    [`sha256=${good}`, "format", "signature_malformed"],
    ["0".repeat(64), "signature", "signature_mismatch"],
  ])("header %j fails at step %s (%s) with 401", (header, step, code) => {
    expect(provider.verifyWebhook(body, header)).toEqual({ ok: false, error: expect.objectContaining({ step, code, status: 401 }) });
  });

  it("during a rotation the replaced secret verifies too (Razorpay signs an event's retries with its first secret); any other fails", () => {
    const rotated = createRazorpayProvider({ key_id, key_secret, webhook_secret: "new-secret", webhook_secret_previous: webhook_secret });
    expect(rotated.verifyWebhook(body, good)).toEqual({ ok: true });
    expect(rotated.verifyWebhook(body, signWebhookBody("new-secret", body))).toEqual({ ok: true });
    expect(rotated.verifyWebhook(body, signWebhookBody("other", body))).toMatchObject({ ok: false, error: { step: "signature", code: "signature_mismatch", status: 401 } });
    // Without it, the replaced secret's retries are refused.
    const replaced = createRazorpayProvider({ key_id, key_secret, webhook_secret: "new-secret" });
    expect(replaced.verifyWebhook(body, good)).toMatchObject({ ok: false, error: { step: "signature" } });
    // A replaced secret alone verifies nothing: with no current secret every webhook fails closed.
    expect(() => createRazorpayProvider({ key_id, key_secret, webhook_secret_previous: webhook_secret })).toThrow(
      "RAZORPAY_WEBHOOK_SECRET_PREVIOUS is set without RAZORPAY_WEBHOOK_SECRET: set the new secret there, and the one it replaced here",
    );
    expect(() => createRazorpayProvider({ key_id, key_secret, webhook_secret, webhook_secret_previous: " " })).toThrow("RAZORPAY_WEBHOOK_SECRET_PREVIOUS: only whitespace; expected the secret itself");
  });

  it("a signature made with another secret fails", () => {
    expect(provider.verifyWebhook(body, signWebhookBody("other", body))).toMatchObject({ ok: false, error: { step: "signature" } });
  });

  it("a signature over re-serialized JSON does not verify the bytes actually sent", () => {
    const reserialized = Buffer.from(JSON.stringify(JSON.parse(body.toString("utf8"))));
    expect(reserialized.equals(body)).toBe(false);
    const signature_of_reserialized = signWebhookBody(webhook_secret, reserialized);
    expect(provider.verifyWebhook(body, signature_of_reserialized)).toMatchObject({ ok: false, error: { step: "signature" } });
  });

  it("any single flipped body byte or signature nibble fails (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.nat(), (bytes, position) => {
        const raw = Buffer.from(bytes);
        const signature = signWebhookBody(webhook_secret, raw);
        if (verifyRazorpayWebhook(webhook_secret, raw, signature).ok !== true) return false;
        const tampered = Buffer.from(raw);
        const index = position % tampered.length;
        tampered[index] = (tampered[index] ?? 0) ^ 0x01;
        const nibble = position % signature.length;
        const flipped = signature.slice(0, nibble) + (signature[nibble] === "0" ? "1" : "0") + signature.slice(nibble + 1);
        return !verifyRazorpayWebhook(webhook_secret, tampered, signature).ok && !verifyRazorpayWebhook(webhook_secret, raw, flipped).ok;
      }),
      { numRuns: 200 },
    );
  });

  it("the comparison is over equal-length buffers: a 64-hex header of the wrong value never throws", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-f]{64}$/), (header) => {
        const check = verifyRazorpayWebhook(webhook_secret, body, header);
        return check.ok === (header === good);
      }),
      { numRuns: 200 },
    );
  });
});

describe("parseWebhook on the simulator's events", () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ auto_deliver: false });
  });
  afterAll(async () => {
    await sim.close();
  });

  it("payment.authorized, payment.captured and order.paid parse into typed events with the signed ids", async () => {
    const provider = sim.provider();
    const order = expectOk(await provider.createOrder({ amount: 25_000, currency: "INR", receipt: "rsv_parse" }));
    const payment_id = (await pay(sim.base_url, order.id)).body.razorpay_payment_id as string;
    expectOk(await provider.capturePayment(payment_id, { amount: 25_000, currency: "INR" }));
    const events = sim.simulator.state.outbox().filter((entry) => entry.body.includes(order.id));
    expect(events.map((entry) => entry.event)).toEqual(["payment.authorized", "payment.captured", "order.paid"]);
    for (const entry of events) expect(provider.verifyWebhook(Buffer.from(entry.body), entry.signature)).toEqual({ ok: true });
    const parsed = events.map((entry) => provider.parseWebhook(Buffer.from(entry.body)));
    expect(parsed[0]).toMatchObject({ type: "payment.authorized", payment: { id: payment_id, order_id: order.id, status: "authorized" } });
    expect(parsed[1]).toMatchObject({ type: "payment.captured", payment: { id: payment_id, amount: 25_000, currency: "INR", captured: true } });
    expect(parsed[2]).toMatchObject({ type: "order.paid", order: { id: order.id, status: "paid", receipt: "rsv_parse" }, payment: { id: payment_id } });
  });

  it("a declined card emits payment.failed", async () => {
    const order = expectOk(await sim.provider().createOrder({ amount: 25_000, currency: "INR", receipt: "rsv_parse_failed" }));
    await pay(sim.base_url, order.id, "4000000000000002");
    const entry = sim.simulator.state.outbox().find((candidate) => candidate.body.includes(order.id));
    expect(parseRazorpayWebhook(Buffer.from(entry!.body))).toMatchObject({ type: "payment.failed", payment: { status: "failed" } });
  });

  it("other events are unsupported; malformed bodies are errors", () => {
    const refund = Buffer.from(JSON.stringify({ entity: "event", event: "refund.processed", payload: {}, created_at: 1 }));
    expect(parseRazorpayWebhook(refund)).toEqual({ type: "unsupported", event: "refund.processed", account_id: null, created_at: 1 });
    expect(parseRazorpayWebhook(Buffer.from("{not json"))).toEqual({ error: "body is not JSON" });
    expect(parseRazorpayWebhook(Buffer.from('{"entity":"payment"}'))).toHaveProperty("error");
    const bad_payment = { entity: "event", event: "payment.captured", payload: { payment: { entity: { id: "pay_x/../y" } } }, created_at: 1 };
    expect(parseRazorpayWebhook(Buffer.from(JSON.stringify(bad_payment)))).toHaveProperty("error");
  });
});
