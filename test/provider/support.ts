// Test helpers for the provider suite: a simulator on loopback, a webhook receiver, and polling.
// Real servers on 127.0.0.1 port 0, no mocks; every helper returns a close function.

import type { FastifyInstance } from "fastify";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { buildServer } from "../../src/server/app.js";
import { createSimulator, type Simulator, type SimulatorOptions } from "../../src/provider/simulator/index.js";
import { createRazorpayProvider, type RazorpayProviderOptions } from "../../src/provider/razorpay/index.js";
import type { Provider } from "../../src/provider/port.js";
import { waitUntil } from "../support/wait.js";

export const webhook_secret = "whsec_test_provider_suite";
export const key_id = "rzp_test_ProviderSuite01";
export const key_secret = "provider-suite-secret";

/** Deterministic base62 ids: 00000000000001, 00000000000002, ... */
export function counterIds(): () => string {
  let next = 0;
  return () => String(++next).padStart(14, "0");
}

export interface RunningSimulator {
  simulator: Simulator;
  app: FastifyInstance;
  base_url: string;
  /** Every request that reached the server at all, any path (proves "no request was sent"). */
  requests: () => number;
  provider(overrides?: Partial<RazorpayProviderOptions>): Provider;
  close(): Promise<void>;
}

export async function startSimulator(options: Partial<SimulatorOptions> = {}): Promise<RunningSimulator> {
  const simulator = createSimulator({ webhook_secret, ids: counterIds(), ...options });
  let requests = 0;
  const app = await buildServer({
    logger: false,
    plugins: [
      (server) => {
        server.addHook("onRequest", async () => {
          requests += 1;
        });
      },
      async (server) => void (await server.register(simulator.plugin)),
    ],
  });
  const base_url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    simulator,
    app,
    base_url,
    requests: () => requests,
    provider: (overrides = {}) =>
      createRazorpayProvider({ key_id, key_secret, base_url, webhook_secret, timeout_ms: 2_000, ...overrides }),
    async close() {
      await simulator.close();
      await app.close();
    },
  };
}

export interface ReceivedWebhook {
  event_id: string | undefined;
  signature: string | undefined;
  raw: Buffer;
  event: string;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Decides the status for the n-th request (0-based); default 200. */
  respond: (index: number) => number;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<WebhookReceiver> {
  const receiver: Partial<WebhookReceiver> & { received: ReceivedWebhook[] } = { received: [], respond: () => 200 };
  const app = await buildServer({
    logger: false,
    plugins: [
      (server) => {
        // Keep the exact bytes: the signature is over them, not over re-serialized JSON.
        server.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
        server.post("/webhooks/razorpay", async (request, reply) => {
          const raw = request.body as Buffer;
          const index = receiver.received.length;
          receiver.received.push({
            event_id: request.headers["x-razorpay-event-id"] as string | undefined,
            signature: request.headers["x-razorpay-signature"] as string | undefined,
            raw,
            event: (JSON.parse(raw.toString("utf8")) as { event: string }).event,
          });
          return reply.status(receiver.respond!(index)).send({ ok: true });
        });
      },
    ],
  });
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  receiver.url = `${base}/webhooks/razorpay`;
  receiver.close = () => app.close();
  return receiver as WebhookReceiver;
}

export async function waitFor(predicate: () => boolean, timeout_ms = 5_000, what = "condition"): Promise<void> {
  await waitUntil(what, predicate, { timeout_ms, interval_ms: 10 });
}

/** Pays an order through the simulator's test checkout. */
export async function pay(base_url: string, order_id: string, card = "4111111111111111"): Promise<{ status: number; body: any }> {
  const response = await fetch(`${base_url}/sim/orders/${order_id}/pay`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ card }),
  });
  return { status: response.status, body: await response.json() };
}

export function expectOk<T>(outcome: { kind: string; value?: T }): T {
  if (outcome.kind !== "ok") throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
  return outcome.value as T;
}

/** What a scripted provider answers: a status and the body's JSON text, sent as given (so it can hold what JSON.stringify never writes, such as a lone "\ud800" escape). */
export interface ScriptedAnswer {
  status: number;
  json: string;
}

export interface ScriptedProvider {
  base_url: string;
  provider(overrides?: Partial<RazorpayProviderOptions>): Provider;
  close(): Promise<void>;
}

/**
 * A broken or hostile provider: a real loopback HTTP server whose every answer `script` writes,
 * given the request's method, path (with query) and parsed JSON body. The razorpay client talks
 * to it as to Razorpay.
 */
export async function startScriptedProvider(script: (method: string, path: string, body: unknown) => ScriptedAnswer): Promise<ScriptedProvider> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const answer = script(request.method ?? "GET", request.url ?? "/", text ? (JSON.parse(text) as unknown) : undefined);
      response.writeHead(answer.status, { "content-type": "application/json" });
      response.end(answer.json);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base_url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base_url,
    provider: (overrides = {}) => createRazorpayProvider({ key_id, key_secret, base_url, webhook_secret, timeout_ms: 2_000, ...overrides }),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A Razorpay order's wire JSON. */
export function wireOrder(fields: { id: string; amount: number; receipt: string | null; notes?: Record<string, string> }): Record<string, unknown> {
  return { entity: "order", amount_paid: 0, currency: "INR", status: "created", notes: {}, created_at: 1_700_000_000, ...fields };
}
