// `bursar mcp-stdio` (the compiled bridge) in front of a real gate, fed what a well-behaved
// client never sends: a token with a line break in it, batches, a request the SDK's schema
// refuses, and a connection cut after the gate took a money call.

import { spawn } from "node:child_process";
import { createServer as createHttpServer } from "node:http";
import { connect, createConnection, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

interface Piped {
  code: number | null;
  stdout: string;
  stderr: string;
  ids: unknown[];
}

/** Writes raw stdin text to a bridge, closes stdin, and collects what it printed and the ids it answered. */
async function pipe(input: string, env: Record<string, string>): Promise<Piped> {
  const { code, stdout, stderr } = await runBursar(["mcp-stdio"], env, input);
  const ids = stdout
    .split("\n")
    .filter((line) => line !== "")
    .flatMap((line) => {
      const parsed = JSON.parse(line) as unknown;
      return (Array.isArray(parsed) ? parsed : [parsed]).map((message) => (message as { id?: unknown }).id);
    });
  return { code, stdout, stderr, ids };
}

const call = (id: number, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

describe("bursar mcp-stdio: unusual input and broken connections", () => {
  let server: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
  });
  afterAll(async () => server.close());

  it("refuses a token that is not a valid header value without printing it", async () => {
    const agent = await server.agent("leaky");
    // e.g. a token pasted with a line break inside: the real token is still in it.
    const token = `${agent.token}\nexport OTHER=1`;
    const piped = await pipe(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })}\n`, {
      BURSAR_URL: server.url,
      BURSAR_AGENT_TOKEN: token,
    });
    // fetch's error quoted the whole header ("Bearer bsr_agent_…\nexport OTHER=1" is an invalid header value).
    expect(piped.stdout).not.toContain(agent.token);
    expect(piped.stderr).not.toContain(agent.token);
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain("BURSAR_AGENT_TOKEN holds whitespace or a control character");
  });

  it("keeps the token out of what it prints when something in front of the gate echoes the Authorization header", async () => {
    const agent = await server.agent("echoed");
    // A misconfigured proxy whose error body quotes the request's headers.
    const echo = createHttpServer((request, response) => {
      response.writeHead(502, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { code: 502, message: `upstream refused ${String(request.headers.authorization)}` } }));
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
      const piped = await pipe(`${JSON.stringify(call(1, "get_block"))}\n`, { BURSAR_URL: url, BURSAR_AGENT_TOKEN: agent.token });
      expect(JSON.parse(piped.stdout.trim())).toMatchObject({ id: 1, error: { message: expect.stringContaining("upstream refused Bearer [redacted]") } });
      expect(piped.stdout).not.toContain(agent.token);
      expect(piped.stderr).not.toContain(agent.token);
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it("answers each request of a JSON-RPC batch (MCP 2025-06-18 has no batches) instead of dropping it", async () => {
    const agent = await server.agent("batcher");
    const batch = [call(1, "get_block"), call(2, "get_block")];
    const piped = await pipe(`${JSON.stringify(batch)}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    // The SDK's reader dropped it with a line on stderr, and a client waited for ids 1 and 2 forever.
    expect(piped.ids.sort()).toEqual([1, 2]);
    const answer = JSON.parse(piped.stdout.trim()) as Array<{ error: { code: number; message: string } }>;
    expect(answer.map((reply) => reply.error.code)).toEqual([-32600, -32600]);
    expect(answer[0]!.error.message).toContain("batches are not supported");
  });

  it("answers a request it cannot accept with a JSON-RPC error for that id instead of dropping it silently", async () => {
    const agent = await server.agent("strict");
    const odd = { ...call(3, "get_block"), trace: "abc" }; // an extra top-level member
    const piped = await pipe(`${JSON.stringify(odd)}\n`, { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(piped.ids).toEqual([3]);
    expect(JSON.parse(piped.stdout.trim())).toMatchObject({ id: 3, error: { code: -32600 } });
  });

  it("reads a last line that has no newline", async () => {
    const agent = await server.agent("no-newline");
    const piped = await pipe(JSON.stringify(call(4, "get_block")), { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(piped.ids).toEqual([4]);
    expect(piped.code).toBe(0);
  });

  describe("the gate received the money call but the connection broke before its answer", () => {
    let proxy: Server;
    let proxy_url = "";
    const sockets = new Set<Socket>();
    beforeAll(async () => {
      const gate = new URL(server.url);
      proxy = createServer((client) => {
        sockets.add(client);
        const upstream = createConnection({ host: gate.hostname, port: Number(gate.port) });
        sockets.add(upstream);
        client.pipe(upstream);
        // The gate has executed the call once its answer starts: cut the client off there.
        upstream.once("data", () => {
          client.destroy();
          upstream.destroy();
        });
        client.on("error", () => undefined);
        upstream.on("error", () => undefined);
      });
      await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
      const address = proxy.address();
      proxy_url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    });

    it("does not tell the agent the gate was unreachable when the order was in fact created", async () => {
      const agent = await server.agent("reset-mid-call");
      const piped = await pipe(`${JSON.stringify(call(1, "create_order", { amount: 5_000, currency: "INR" }))}\n`, {
        BURSAR_URL: proxy_url,
        BURSAR_AGENT_TOKEN: agent.token,
      });
      // The gate did take the call: the money is held for an order.
      const block = await server.started.bursar.ledger.getBlock(agent.block_id);
      expect(block.held).toBe(5_000);
      const answer = JSON.parse(piped.stdout.trim()) as { id: number; error?: { message: string } };
      expect(answer.id).toBe(1);
      // It was "cannot reach the gate … is `bursar serve` running?", inviting a retry under a new key.
      expect(answer.error?.message).not.toMatch(/cannot reach the gate/);
      expect(answer.error?.message).toMatch(/broke before its answer .*repeat it with the same idempotency_key/);
    });
  });
});

it("stops cleanly (exit 0, a line on stderr) when its stdin is reset, instead of dying of an unhandled error", async () => {
  ensureBuilt();
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const client = connect((server.address() as { port: number }).port, "127.0.0.1");
  await new Promise((resolve) => client.once("connect", resolve));
  const peer = await accepted;
  const child = spawn(process.execPath, [bursar_bin, "mcp-stdio"], {
    env: { ...process.env, BURSAR_URL: "http://127.0.0.1:1", BURSAR_AGENT_TOKEN: "bsr_agent_x" },
    stdio: [client, "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  // Once the bridge has answered a request (the gate is unreachable: an error), it is reading stdin.
  const answered = new Promise((resolve) => child.stdout.once("data", resolve));
  peer.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })}\n`);
  await answered;
  client.destroy();
  peer.resetAndDestroy();
  server.close();
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  const code = await exited;
  clearTimeout(timer);
  expect(stderr).not.toMatch(/Unhandled 'error' event/);
  expect(stderr).toContain("stdin failed");
  expect(code).toBe(0);
});
