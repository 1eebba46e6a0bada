// A provider that echoes what it was sent (the key secret, the Authorization header, the webhook
// secret) in its answers: the razorpay client scrubs that text where it reads the wire, so the
// agent's result, the stored result, the release reason and a replay never hold it. And a
// redirect, which is not followed, is named as one.

import Database from "better-sqlite3";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createRazorpayProvider } from "../../src/provider/razorpay/index.js";
import { testServer, type TestServer } from "../support/server.js";
import { key_id, wireOrder } from "./support.js";

// 24 characters and more, and shaped like nothing the secret-looking patterns match: only the
// known-secret check (rememberSecretValues, called by startServer) can find them.
const echo_key_secret = "Kq8ZrT2mWx9LpB4nYc7VdF1sEchoKey";
const echo_webhook_secret = "Wh5TgYp3Lk8QzXc2Vb6NmR9aEchoHook";
const basic_credential = Buffer.from(`${key_id}:${echo_key_secret}`, "utf8").toString("base64");
const secrets = [echo_key_secret, echo_webhook_secret, basic_credential];

type Mode = "echo_notes" | "refuse_basic" | "refuse_raw" | "echo_receipt" | "echo_id";
let mode: Mode = "echo_notes";
let created = 0;

/** Answers every create with what it was sent echoed back, as `mode` says. */
function echoingProvider(request: IncomingMessage, body: Record<string, unknown>, response: ServerResponse): void {
  const authorization = String(request.headers.authorization);
  const answer = (status: number, json: unknown) => {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(json));
  };
  const { amount, receipt } = body as { amount: number; receipt: string };
  if (mode === "refuse_basic") {
    return answer(400, { error: { code: "BAD_REQUEST_ERROR", description: `Authentication failed for ${authorization}`, field: echo_key_secret, source: authorization, step: "auth", reason: echo_webhook_secret } });
  }
  if (mode === "refuse_raw") {
    return answer(400, { error: { code: "BAD_REQUEST_ERROR", description: `the key secret ${echo_key_secret} is not valid`, field: "amount" } });
  }
  if (mode === "echo_receipt") return answer(200, wireOrder({ id: `order_Echo${++created}`, amount, receipt: authorization }));
  if (mode === "echo_id") return answer(200, wireOrder({ id: `order_${echo_key_secret}`, amount, receipt }));
  const notes = { echo: echo_key_secret, auth: authorization, wh: echo_webhook_secret, note: `sent with ${authorization}`, ship_to: "12 Park Street" };
  return answer(200, wireOrder({ id: `order_Echo${++created}`, amount, receipt, notes }));
}

let upstream: ReturnType<typeof createServer>;
let server: TestServer;

beforeAll(async () => {
  upstream = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => echoingProvider(request, chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>) : {}, response));
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  server = await testServer({
    BURSAR_PROVIDER: "razorpay",
    RAZORPAY_KEY_ID: key_id,
    RAZORPAY_KEY_SECRET: echo_key_secret,
    RAZORPAY_WEBHOOK_SECRET: echo_webhook_secret,
    RAZORPAY_BASE_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
  });
});

afterAll(async () => {
  await server?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

function expectNoSecret(what: string, text: string): void {
  for (const secret of secrets) expect(text.includes(secret), `${what} holds ${secret.slice(0, 6)}…`).toBe(false);
}

/** Every reservation's release reason and every stored result, read from the database file itself. */
function storedRows(): { release_reasons: string[]; results: string[] } {
  const db = new Database(join(server.dir, "bursar.db"), { readonly: true });
  try {
    const release_reasons = db.prepare("SELECT release_reason FROM reservations WHERE release_reason IS NOT NULL").all() as { release_reason: string }[];
    const results = db.prepare("SELECT result_json FROM idempotency_keys WHERE result_json IS NOT NULL").all() as { result_json: string }[];
    return { release_reasons: release_reasons.map((row) => row.release_reason), results: results.map((row) => row.result_json) };
  } finally {
    db.close();
  }
}

async function createOrder(client: Client, args: Record<string, unknown>) {
  const result = await client.callTool({ name: "create_order", arguments: args });
  return { result, text: JSON.stringify(result) };
}

/** A new agent's create_order, answered as `answering` says (then the provider echoes notes again). */
async function orderAnswered(answering: Mode, name: string, args: Record<string, unknown>) {
  mode = answering;
  try {
    const client = await server.client((await server.agent(name)).token);
    return { client, ...(await createOrder(client, args)) };
  } finally {
    mode = "echo_notes";
  }
}

describe("a provider that echoes the request's secrets", () => {
  it("answering an order with them in its notes: the agent, the stored result and a replay see [redacted]", async () => {
    const args = { amount: 1_500, currency: "INR", idempotency_key: "echo-notes-1" };
    const { client, ...first } = await orderAnswered("echo_notes", "echo-notes", args);
    expect(first.result.structuredContent).toMatchObject({ effect: "ALLOW", order: { notes: { echo: "[redacted]", auth: "[redacted]", wh: "[redacted]", note: "[redacted]", ship_to: "12 Park Street" } } });
    expectNoSecret("the agent's result", first.text);

    const stored = storedRows().results.filter((json) => json.includes("order_Echo"));
    expect(stored.length).toBeGreaterThan(0);
    for (const json of stored) expectNoSecret("a stored result", json);

    const replay = await createOrder(client, args);
    const order_id = (first.result.structuredContent as { order: { id: string } }).order.id;
    expect(replay.result.structuredContent).toMatchObject({ order: { id: order_id, notes: { echo: "[redacted]", ship_to: "12 Park Street" } } });
    expectNoSecret("the replay", replay.text);
  });

  it("refusing an order with the Authorization header in its error: the agent's text and the release reason hold neither", async () => {
    const { client, ...refused } = await orderAnswered("refuse_basic", "echo-refusal", { amount: 1_600, currency: "INR" });
    expect(refused.result.structuredContent).toMatchObject({ provider: "refused", error: { code: "BAD_REQUEST_ERROR", description: "[redacted]" } });
    expect(refused.text).toContain("REFUSED by the provider: [redacted]");
    expectNoSecret("the agent's result", refused.text);
    const block = await client.callTool({ name: "get_block", arguments: {} });
    expect(block.structuredContent).toMatchObject({ held: 0, spent: 0 });
  });

  it("refusing an order with the bare key secret in its description: redacted wherever it is told", async () => {
    const refused = await orderAnswered("refuse_raw", "echo-raw", { amount: 1_700, currency: "INR" });
    expect(refused.result.structuredContent).toMatchObject({ provider: "refused", error: { description: "[redacted]", field: "amount" } });
    expectNoSecret("the agent's result", refused.text);
  });

  it("answering with the Authorization header as the receipt: the outcome is unknown, and its reason does not repeat it", async () => {
    const args = { amount: 1_800, currency: "INR", idempotency_key: "echo-receipt-1" };
    const { client, ...first } = await orderAnswered("echo_receipt", "echo-receipt", args);
    expect(first.text).toContain('receipt \\"[redacted]\\"');
    expectNoSecret("the agent's result", first.text);
    expectNoSecret("the replay", (await createOrder(client, args)).text);
  });

  it("answering with the key secret as the order's id: no such id is taken, and the outcome is unknown", async () => {
    const first = await orderAnswered("echo_id", "echo-id", { amount: 1_900, currency: "INR" });
    expect(first.result.structuredContent).toMatchObject({ provider: "unknown", reason: "unexpected order shape (id: an id that holds a secret)" });
    expectNoSecret("the agent's result", first.text);
  });

  it("leaves none of them in any release reason, any stored result, or the database's files", async () => {
    const rows = storedRows();
    expect(rows.release_reasons.length).toBeGreaterThanOrEqual(2);
    for (const reason of rows.release_reasons) expectNoSecret("a release reason", reason);
    for (const json of rows.results) expectNoSecret("a stored result", json);
    for (const file of ["bursar.db", "bursar.db-wal"].map((name) => join(server.dir, name)).filter(existsSync)) {
      expectNoSecret(file, readFileSync(file).toString("latin1"));
    }
  });
});

describe("a provider that answers with a redirect", () => {
  for (const status of [302, 307]) {
    it(`answering ${status}: not followed, unknown, and the reason names the redirect`, async () => {
      const paths: string[] = [];
      const redirecting = createServer((request, response) => {
        paths.push(request.url ?? "");
        response.writeHead(status, { location: "/elsewhere" });
        response.end();
      });
      await new Promise<void>((resolve) => redirecting.listen(0, "127.0.0.1", resolve));
      try {
        const base_url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`;
        const provider = createRazorpayProvider({ key_id, key_secret: echo_key_secret, base_url, timeout_ms: 2_000 });
        const outcome = await provider.createOrder({ amount: 1_000, currency: "INR", receipt: "rsv_redirect" });
        expect(outcome).toEqual({ kind: "unknown", reason: "the provider answered with a redirect, which Bursar does not follow" });
        expect(paths).toEqual(["/v1/orders"]);
      } finally {
        redirecting.closeAllConnections();
        await new Promise((resolve) => redirecting.close(resolve));
      }
    });
  }
});
