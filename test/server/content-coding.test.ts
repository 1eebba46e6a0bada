// Operator routes and Razorpay's webhook read bodies as sent, as /mcp and ingestion do: a body in
// a content coding is refused 415 before it is read. JSON that only claimed gzip used to create an
// agent (201), and a body really gzipped failed as "not valid JSON" (400).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signWebhookBody } from "../../src/provider/razorpay/index.js";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const refusal = {
  code: "unsupported_content_encoding",
  message: "Content-Encoding gzip is not accepted; send the body uncompressed, without a Content-Encoding",
  details: { content_encoding: "gzip" },
};

async function post(path: string, body: Uint8Array<ArrayBuffer> | string, headers: Record<string, string>) {
  const response = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: response.status, accept_encoding: response.headers.get("accept-encoding"), body: (await response.json()) as Record<string, unknown> };
}

describe("a body in a content coding", () => {
  const operator = { authorization: `Bearer ${operator_token}` };

  it("is refused 415 on operator routes, gzipped or only claiming it, and nothing is created", async () => {
    const agents = () => server.started.bursar.driver.read(async (tx) => (await tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM agents"))?.n);
    const agents_before = await agents();
    const json = JSON.stringify({ name: "coded" });
    for (const body of [json, new Uint8Array(gzipSync(json)) as Uint8Array<ArrayBuffer>]) {
      for (const path of ["/api/v1/agents", "/api/v1/evidence-sources"]) {
        expect(await post(path, body, { ...operator, "content-encoding": "gzip" })).toEqual({ status: 415, accept_encoding: "identity", body: { error: refusal } });
      }
    }
    expect(await agents()).toBe(agents_before);
    // identity is no coding at all.
    expect((await post("/api/v1/agents", json, { ...operator, "content-encoding": "identity" })).status).toBe(201);
  });

  it("is refused only after the operator token is checked: without one, 401", async () => {
    expect((await post("/api/v1/agents", "{}", { "content-encoding": "gzip" })).status).toBe(401);
  });

  it("is refused 415 on Razorpay's webhook before its signature is checked", async () => {
    const secret = readFileSync(join(server.dir, "webhook-secret"), "utf8").trim();
    const event = new Uint8Array(gzipSync(JSON.stringify({ entity: "event", event: "payment.authorized", contains: [], payload: {}, created_at: 1_790_000_000 }))) as Uint8Array<ArrayBuffer>;
    const headers = { "content-encoding": "gzip", "x-razorpay-signature": signWebhookBody(secret, Buffer.from(event)), "x-razorpay-event-id": "evt_Coded" };
    expect(await post("/webhooks/razorpay", event, headers)).toEqual({ status: 415, accept_encoding: "identity", body: { error: refusal } });
  });
});
