// The routes that must read a body before they know its sender (the signed ingest webhook and
// Razorpay's webhook: their HMAC covers the body) bound what such bodies hold, per route, by the
// bytes that have come, and give a body a deadline. Stalled uploads held their route's limit
// each, with nothing bounding how many: 100 to each route held 300 MiB for up to 5 minutes.

import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery_bytes_max } from "../../src/ingest/delivery.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { buildServer } from "../../src/server/app.js";
import { ingest_unproven_bytes_max } from "../../src/server/routes/ingest.js";
import { boundUnprovenBody, unproven_body_retry_after_seconds } from "../../src/server/unproven-bodies.js";
import { RawConnection } from "../support/raw-connection.js";
import { testServer, type TestServer } from "../support/server.js";

const budget_bytes = 4_096;
// Long enough that a stalled body in the 503 test is not timed out (freeing the budget) by a pause of the machine.
const deadline_ms = 2_000;

describe("a route bounded by boundUnprovenBody (a small budget and deadline)", () => {
  let app: FastifyInstance;
  let url: string;
  beforeAll(async () => {
    app = await buildServer({
      logger: false,
      plugins: [
        (scope) =>
          void scope.post("/bounded", { preParsing: boundUnprovenBody("test", budget_bytes, deadline_ms) }, async (request) => ({
            bytes: JSON.stringify(request.body).length,
          })),
        // The same budget behind a small body limit: a body declared over it is answered 413 unread.
        (scope) => void scope.post("/small", { bodyLimit: 1_024, preParsing: boundUnprovenBody("test", budget_bytes, deadline_ms) }, async () => ({ ok: true })),
      ],
    });
    url = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => app.close());

  /** A POST whose head declares `declared` bytes and whose body stops after `sent` of them. */
  async function stalled(declared: number, sent: number): Promise<RawConnection> {
    const connection = await RawConnection.open(url);
    connection.writeHead(`POST /bounded HTTP/1.1\ncontent-type: application/json\ncontent-length: ${declared}`);
    if (sent > 0) connection.write(`"${"x".repeat(sent - 1)}`);
    return connection;
  }

  const post = (body: string) => fetch(`${url}/bounded`, { method: "POST", headers: { "content-type": "application/json" }, body });

  it("counts the bytes that have come, not the length declared: heads alone hold nothing", async () => {
    const heads = await Promise.all(Array.from({ length: 8 }, () => stalled(1_000_000, 0)));
    try {
      expect((await post('"ok"')).status).toBe(200);
    } finally {
      heads.forEach((connection) => connection.destroy());
    }
  });

  it("answers 503 busy with Retry-After, closing the connection, past the budget; a body sent once the budget frees is taken", async () => {
    const filling = await stalled(budget_bytes * 2, budget_bytes - 10);
    try {
      // Its bytes have come once an answer on another connection has (the head was read first).
      await new Promise((resolve) => setTimeout(resolve, 50));
      const refused = await post(JSON.stringify("y".repeat(100)));
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe(String(unproven_body_retry_after_seconds));
      expect(refused.headers.get("connection")).toBe("close");
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("busy");
    } finally {
      filling.destroy();
    }
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      status = (await post(JSON.stringify("y".repeat(100)))).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(status).toBe(200);
  });

  it("frees what a body answered 413 before it was read held, at once, not at the deadline", async () => {
    const connection = await RawConnection.open(url);
    // The head and the first bytes in one write: the first chunk is counted before the 413.
    connection.write(`POST /small HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"${"x".repeat(3_000)}`);
    expect((await connection.response()).status).toBe(413);
    connection.destroy();
    expect((await post(JSON.stringify("z".repeat(budget_bytes - 100)))).status).toBe(200);
  });

  it("keeps a connection usable after an answer sent before its body (declared within the limit) was read: the rest is discarded", async () => {
    const connection = await RawConnection.open(url);
    const body = `"${"x".repeat(2_000)}"`;
    connection.write(`POST /bounded HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: nonsense\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect((await connection.response()).status).toBe(415);
    connection.writeHead("GET /healthz HTTP/1.1");
    expect((await connection.response()).status).toBe(200);
    connection.destroy();
    expect((await post(JSON.stringify("z".repeat(budget_bytes - 100)))).status).toBe(200);
  });

  it("answers 408 body_timeout to a body not whole within the deadline, and frees what it held", async () => {
    const slow = await stalled(2_000, 1_000);
    const answer = await slow.response(10 * deadline_ms);
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "body_timeout" } });
    await slow.closed;
    expect((await post(JSON.stringify("z".repeat(budget_bytes - 100)))).status).toBe(200);
  });
});

describe("the ingest webhook and Razorpay's webhook", () => {
  let server: TestServer;
  let source: { id: string; signing_key: string };
  beforeAll(async () => {
    server = await testServer();
    source = (await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "budget" })).body;
  });
  afterAll(async () => server.close());

  const record = (event_id: string) =>
    `${JSON.stringify({ schema: "bursar.gateway-decision/1", event_id, occurred_at: "2026-10-09T14:03:11Z", decision: "allow", tool: "t", args: {} })}\n`;

  async function deliver(event_id: string): Promise<number> {
    const body = Buffer.from(record(event_id));
    const response = await fetch(`${server.url}/ingest/${source.id}`, {
      method: "POST",
      headers: { "content-type": "application/x-ndjson", "bursar-signature": signatureHeader([source.signing_key], body, new Date()) },
      body: new Uint8Array(body),
    });
    await response.arrayBuffer();
    return response.status;
  }

  /** An ingest delivery whose head declares the whole 2 MiB and whose body stops one byte short, after `before` (pipelined requests). */
  async function stalledDelivery(before = ""): Promise<RawConnection> {
    const connection = await RawConnection.open(server.url);
    const header = signatureHeader([source.signing_key], Buffer.from("never sent"), new Date());
    connection.write(before);
    connection.writeHead(`POST /ingest/${source.id} HTTP/1.1\ncontent-type: application/x-ndjson\nbursar-signature: ${header}\ncontent-length: ${delivery_bytes_max}`);
    connection.write(Buffer.alloc(delivery_bytes_max - 1, "x"));
    return connection;
  }

  it("have budgets of their own: bodies filling the ingest webhook's leave Razorpay's webhook answering", async () => {
    const stalled: RawConnection[] = [];
    try {
      for (let i = 0; i < ingest_unproven_bytes_max / delivery_bytes_max; i++) stalled.push(await stalledDelivery());
      let status = 200;
      for (let attempt = 0; attempt < 100 && status !== 503; attempt++) {
        status = await deliver(`evt_full_${attempt}`);
        if (status !== 503) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(status).toBe(503);
      const webhook = await fetch(`${server.url}/webhooks/razorpay`, { method: "POST", headers: { "content-type": "application/json", "x-razorpay-signature": "00" }, body: "{}" });
      expect(webhook.status).toBe(401);
    } finally {
      stalled.forEach((connection) => connection.destroy());
    }
  });

  it("free what a pipelined delivery held, queued behind answers its client never read, once its connection closes", async () => {
    // The review's case: 600 GET /metrics answers nobody reads, then the delivery. Node never
    // finishes or closes the answer of a request queued so; it destroys the request.
    const pipelined = await stalledDelivery("GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".repeat(600));
    await new Promise((resolve) => setTimeout(resolve, 300));
    pipelined.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // All but one delivery's share of the budget: had the pipelined one kept its share, it would be full.
    const stalled: RawConnection[] = [];
    try {
      for (let i = 0; i < ingest_unproven_bytes_max / delivery_bytes_max - 1; i++) stalled.push(await stalledDelivery());
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await deliver("evt_freed")).toBe(200);
    } finally {
      stalled.forEach((connection) => connection.destroy());
    }
  });
});
