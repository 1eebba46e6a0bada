// /mcp over real HTTP with bodies an SDK client would never send: argument shapes the SDK's
// schema and Fastify's JSON parser used to stop before the policy (so no rule and no evidence),
// and the Origin check against a DNS-rebinding page.

import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawToolCall, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;
let server: TestServer;

beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const mcp_headers = (token: string) => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  authorization: `Bearer ${token}`,
});

/** Log size: every money decision appends one entry. */
async function treeSize(): Promise<number> {
  const answer = await server.api<{ tree_size: number }>("GET", "/api/v1/log/entries?start=0&end=0");
  return answer.body.tree_size;
}

describe("argument shapes that never reach the policy (DESIGN: any argument shape reaches the policy, refused under R0 with evidence)", () => {
  it("a money call whose arguments carry a \"__proto__\" or \"constructor\" key gets a rule and an evidence entry, not HTTP 400", async () => {
    const agent = await server.agent("proto-smuggler");
    for (const args of [
      '{"amount": 5000, "currency": "INR", "__proto__": {"transfers": [{"account": "acc_x", "amount": 5000}]}}',
      '{"amount": 5000, "currency": "INR", "constructor": {"prototype": {"partial_payment": true}}}',
    ]) {
      const before = await treeSize();
      const answer = await rawToolCall(server.url, agent.token, "create_order", args);
      // Fastify's default parser answered 400 ("not valid JSON") and nothing was logged.
      expect({ args, status: answer.status, body: answer.text.slice(0, 160) }).toMatchObject({ args, status: 200 });
      const result = (JSON.parse(answer.text) as { result: { isError?: boolean; structuredContent: Structured } }).result;
      expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0", evidence: { seq: expect.any(Number) } });
      expect(await treeSize()).toBe(before + 1);
    }
  });

  it("a \"__proto__\" note (kept as data by providerNotes) reaches the gate over /mcp", async () => {
    const agent = await server.agent("proto-note");
    const answer = await rawToolCall(server.url, agent.token, "create_order", '{"amount": 5000, "currency": "INR", "notes": {"__proto__": "x"}}');
    expect({ status: answer.status, body: answer.text.slice(0, 160) }).toMatchObject({ status: 200 });
    const result = (JSON.parse(answer.text) as { result: { structuredContent: Structured } }).result;
    expect(result.structuredContent).toMatchObject({ effect: expect.any(String), evidence: { seq: expect.any(Number) } });
  });

  it("a money call whose arguments are not an object is refused under R0 with evidence, not a JSON-RPC -32603", async () => {
    const agent = await server.agent("positional");
    for (const args of ['[5000, "INR"]', '"amount=5000 currency=INR"', "null"]) {
      const before = await treeSize();
      const answer = await rawToolCall(server.url, agent.token, "create_order", args);
      expect(answer.status).toBe(200);
      const body = JSON.parse(answer.text) as { result?: { structuredContent: Structured }; error?: { code: number; message: string } };
      // The SDK's schema answered a JSON-RPC error ("expected record") and nothing was logged.
      expect({ args, error: body.error?.code }).toEqual({ args, error: undefined });
      expect(body.result?.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0", evidence: { seq: expect.any(Number) } });
      expect(await treeSize()).toBe(before + 1);
    }
  });
});

describe("Origin validation (docs/clients.md: only loopback origins, which also stops DNS rebinding)", () => {
  /** node:http, because fetch will not let a test set Host. */
  function post(headers: Record<string, string>, body: string): Promise<number> {
    const url = new URL(server.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  it("refuses a rebinding page: Origin and Host both name the attacker's domain", async () => {
    const agent = await server.agent("rebind");
    const port = new URL(server.url).port;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    // (A foreign Origin against the loopback Host: test/gate/security.test.ts.) After DNS
    // rebinding the browser sends Host = Origin's host = the attacker's name: a "same host" rule
    // would let it through.
    const status = await post(
      { ...mcp_headers(agent.token), host: `rebind.attacker.example:${port}`, origin: `http://rebind.attacker.example:${port}` },
      body,
    );
    expect(status).toBe(403);
  });
});

describe("methods other than POST (the gate's /mcp is stateless)", () => {
  it("answers GET and DELETE with 405 and Allow: POST, with or without a JSON content type", async () => {
    const agent = await server.agent("methods");
    for (const method of ["GET", "DELETE"]) {
      const variants: Array<Record<string, string>> = [{ authorization: `Bearer ${agent.token}` }, { authorization: `Bearer ${agent.token}`, "content-type": "application/json" }];
      for (const headers of variants) {
        const response = await fetch(`${server.url}/mcp`, { method, headers });
        expect({ method, headers, status: response.status, allow: response.headers.get("allow") }).toEqual({ method, headers, status: 405, allow: "POST" });
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
      }
    }
  });
});

describe("JSON-RPC batches (MCP 2025-06-18 removed batching)", () => {
  it("refuses a batch of money calls whole with 400 and -32600 before any of it runs", async () => {
    const agent = await server.agent("batcher");
    const size = await treeSize();
    const batch = Array.from({ length: 16 }, (_, index) => ({
      jsonrpc: "2.0",
      id: index,
      method: "tools/call",
      params: { name: "create_order", arguments: { amount: 1_000, currency: "INR", idempotency_key: `batch-${index}` } },
    }));
    const response = await fetch(`${server.url}/mcp`, { method: "POST", headers: mcp_headers(agent.token), body: JSON.stringify(batch) });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("batches are not supported") } });
    expect(await treeSize()).toBe(size);
    const block = await server.api<{ held: number }>("GET", `/api/v1/blocks/${agent.block_id}`);
    expect(block.body.held).toBe(0);
  });
});
