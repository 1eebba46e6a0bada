// The simulator mounted under /simulator in another fastify app, delivering its webhooks to that
// app's own /webhooks/razorpay (the `bursar serve` wiring), and `bursar simulator` standalone.

import { PassThrough } from "node:stream";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer } from "../../src/server/app.js";
import { createSimulator, type Simulator } from "../../src/provider/simulator/index.js";
import { createRazorpayProvider } from "../../src/provider/razorpay/index.js";
import type { ParsedWebhook, Provider } from "../../src/provider/port.js";
import { run as runSimulatorCommand, help as simulatorHelp } from "../../src/cli/commands/simulator.js";
import { UsageError } from "../../src/cli/command.js";
import { counterIds, expectOk, key_id, key_secret, waitFor, webhook_secret } from "./support.js";

describe("mounted under /simulator with webhooks to the same app", () => {
  let app: FastifyInstance;
  let simulator: Simulator;
  let provider: Provider;
  let base: string;
  const settled: ParsedWebhook[] = [];

  beforeAll(async () => {
    simulator = createSimulator({ webhook_secret, ids: counterIds(), webhook_retry_base_ms: 20 });
    // Provider first (the webhook route needs it); its base URL is set once the port is known.
    let verifier: Provider = createRazorpayProvider({ key_id, key_secret, webhook_secret });
    app = await buildServer({
      logger: false,
      plugins: [
        async (server) => void (await server.register(simulator.plugin, { prefix: "/simulator" })),
        async (server) =>
          void (await server.register(async (webhooks) => {
            webhooks.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
            webhooks.post("/webhooks/razorpay", async (request, reply) => {
              const raw = request.body as Buffer;
              const check = verifier.verifyWebhook(raw, request.headers["x-razorpay-signature"] as string | undefined);
              if (!check.ok) return reply.status(check.error.status).send({ error: { code: check.error.code } });
              const parsed = verifier.parseWebhook(raw);
              if ("error" in parsed) return reply.status(400).send({ error: { code: "malformed" } });
              settled.push(parsed);
              return { ok: true };
            });
          })),
      ],
    });
    base = await app.listen({ host: "127.0.0.1", port: 0 });
    simulator.setWebhookUrl(`${base}/webhooks/razorpay`);
    provider = createRazorpayProvider({ key_id, key_secret, webhook_secret, base_url: `${base}/simulator`, timeout_ms: 2_000 });
    verifier = provider;
  });

  afterAll(async () => {
    await simulator.close();
    await app.close();
  });

  it("a purchase through /simulator settles by webhook at the app's /webhooks/razorpay", async () => {
    const order = expectOk(await provider.createOrder({ amount: 12_300, currency: "INR", receipt: "rsv_mounted" }));
    const paid = await fetch(`${base}/simulator/sim/orders/${order.id}/pay`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ card: "4111111111111111" }),
    });
    const payment_id = ((await paid.json()) as { razorpay_payment_id: string }).razorpay_payment_id;
    expectOk(await provider.capturePayment(payment_id, { amount: 12_300, currency: "INR" }));
    await waitFor(() => settled.length === 3, 5_000, "three settled webhooks");
    expect(settled.map((event) => event.type)).toEqual(["payment.authorized", "payment.captured", "order.paid"]);
  });

  it("the app's own routes and error shape are untouched by the simulator's", async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const missing = await fetch(`${base}/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: "not_found" } });
    const unsigned = await fetch(`${base}/webhooks/razorpay`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(unsigned.status).toBe(401);
    const bad_json = await fetch(`${base}/simulator/v1/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Basic ${Buffer.from(`${key_id}:${key_secret}`).toString("base64")}` },
      body: "{nope",
    });
    expect(bad_json.status).toBe(400);
    expect(await bad_json.json()).toMatchObject({ error: { code: "BAD_REQUEST_ERROR" } });
  });
});

describe("bursar simulator", () => {
  const io = () => {
    const stdout = new PassThrough();
    let text = "";
    stdout.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
    return { io: { stdout, stderr: new PassThrough(), env: {}, interactive: false, stderr_interactive: false }, output: () => text };
  };

  it("help documents the options, routes, test cards and environment", () => {
    for (const word of ["--port", "--host", "--webhook-url", "--webhook-secret", "RAZORPAY_WEBHOOK_SECRET", "4000000000000002", "/sim/faults"]) {
      expect(simulatorHelp).toContain(word);
    }
  });

  it("refuses to start without a webhook secret", async () => {
    await expect(runSimulatorCommand(["--port", "0"], io().io)).rejects.toBeInstanceOf(UsageError);
    await expect(runSimulatorCommand(["--port", "x", "--webhook-secret", "s"], io().io)).rejects.toBeInstanceOf(UsageError);
  });

  it("runs standalone at /, prints where it listens, and stops on SIGINT", async () => {
    const { io: cli_io, output } = io();
    const running = runSimulatorCommand(["--port", "0", "--webhook-secret", "s"], cli_io);
    await waitFor(() => output().includes("listening on"), 5_000, "listening line");
    const address = /listening on (\S+)/.exec(output())![1]!;
    const provider = createRazorpayProvider({ key_id, key_secret, base_url: address, timeout_ms: 2_000 });
    expect(await provider.findOrdersByReceipt("rsv_cli")).toEqual({ kind: "ok", value: [] });
    process.emit("SIGINT");
    expect(await running).toBe(0);
  });
});
