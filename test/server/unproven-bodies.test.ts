// The two routes that must read a body before they know its sender (the signed ingest webhook
// and Razorpay's webhook: their HMAC covers the body) share one budget per server. Stalled
// uploads held their route's limit each, with nothing bounding how many: 100 of each held 300 MiB.

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery_bytes_max } from "../../src/ingest/delivery.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { unproven_body_bytes_max, unproven_body_retry_after_seconds } from "../../src/server/unproven-bodies.js";
import { RawConnection } from "../support/raw-connection.js";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
let source: { id: string; signing_key: string };

beforeAll(async () => {
  server = await testServer();
  const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "budget" });
  source = created.body;
});
afterAll(async () => server.close());

const record = (event_id: string) =>
  `${JSON.stringify({ schema: "bursar.gateway-decision/1", event_id, occurred_at: "2026-10-09T14:03:11Z", decision: "allow", tool: "t", args: {} })}\n`;

/** A signed delivery of one record, as a sender posts it; resolves with the status and the retry-after header. */
async function deliver(event_id: string): Promise<{ status: number; retry_after: string | null; body: Record<string, unknown> }> {
  const body = Buffer.from(record(event_id));
  const response = await fetch(`${server.url}/ingest/${source.id}`, {
    method: "POST",
    headers: { "content-type": "application/x-ndjson", "bursar-signature": signatureHeader([source.signing_key], body, new Date()) },
    body: new Uint8Array(body),
  });
  return { status: response.status, retry_after: response.headers.get("retry-after"), body: (await response.json()) as Record<string, unknown> };
}

/** A signed delivery of one record sent chunked (no Content-Length); resolves with the status. */
function deliverChunked(event_id: string): Promise<{ status: number }> {
  const body = Buffer.from(record(event_id));
  const headers = { "content-type": "application/x-ndjson", "bursar-signature": signatureHeader([source.signing_key], body, new Date()) };
  return new Promise((resolve, reject) => {
    const sent = httpRequest(`${server.url}/ingest/${source.id}`, { method: "POST", headers }, (response) => {
      response.resume();
      response.on("end", () => resolve({ status: response.statusCode ?? 0 }));
    });
    sent.on("error", reject);
    sent.write(body);
    sent.end();
  });
}

/** A delivery whose head declares the whole 2 MiB limit and whose body stalls after a few bytes. */
async function stalledDelivery(): Promise<RawConnection> {
  const connection = await RawConnection.open(server.url);
  const header = signatureHeader([source.signing_key], Buffer.from("never sent"), new Date());
  connection.writeHead(`POST /ingest/${source.id} HTTP/1.1\ncontent-type: application/x-ndjson\nbursar-signature: ${header}\ncontent-length: ${delivery_bytes_max}`);
  connection.write('{"schema":');
  return connection;
}

describe("bodies read before their sender is known", () => {
  it("hold at most the budget together: past it a delivery is answered 503 busy with Retry-After, and delivered again once the budget frees, it is taken", async () => {
    expect(unproven_body_bytes_max % delivery_bytes_max).toBe(0);
    const stalled: RawConnection[] = [];
    try {
      for (let i = 0; i < unproven_body_bytes_max / delivery_bytes_max; i++) stalled.push(await stalledDelivery());
      // Every stalled head has been read once this operator call (after them, on its own connection) is answered.
      expect((await server.api("GET", "/api/v1/evidence-sources")).status).toBe(200);
      const refused = await deliver("evt_busy");
      expect(refused).toMatchObject({ status: 503, retry_after: String(unproven_body_retry_after_seconds), body: { error: { code: "busy" } } });
      // Razorpay's webhook shares the budget.
      const webhook = await fetch(`${server.url}/webhooks/razorpay`, { method: "POST", headers: { "content-type": "application/json", "x-razorpay-signature": "00" }, body: "{}" });
      expect(webhook.status).toBe(503);
      stalled.pop()!.destroy();
      // The freed share is released when the server sees the connection close.
      let taken = await deliver("evt_busy");
      for (let attempt = 0; taken.status === 503 && attempt < 50; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        taken = await deliver("evt_busy");
      }
      expect(taken).toMatchObject({ status: 200, body: { written: 1 } });
    } finally {
      for (const connection of stalled) connection.destroy();
    }
  });

  it("are released once answered, so deliveries one after another never fill the budget", async () => {
    // Chunked, each reserves the whole 2 MiB limit: 40 of them are more than the budget holds.
    const rounds = unproven_body_bytes_max / delivery_bytes_max + 8;
    for (let i = 0; i < rounds; i++) expect((await deliverChunked(`evt_seq_${i}`)).status).toBe(200);
  });
});
