// `bursar mcp-stdio` (the compiled bridge) answers every request it cannot forward, the
// tools/calls it forwards unchecked by the SDK's schema among them, and keeps its stderr to its
// own one-line diagnostics.

import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bridge_error_code, in_flight_max } from "../../src/cli/commands/mcp-stdio.js";
import { message_bytes_max } from "../../src/server/jsonrpc.js";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";
import { waitUntil } from "../support/wait.js";

/** Every bridge run here is killed past this, so a bridge that never answers fails the test rather than hanging it. */
const run_timeout_ms = 15_000;

interface Answer {
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: { http_status?: number } };
}

/** Writes the lines to a bridge's stdin, closes it, and collects its answers, stderr and exit code. */
async function pipe(lines: string[], env: Record<string, string>): Promise<{ code: number | null; answers: Answer[]; stderr: string }> {
  const { code, stdout, stderr } = await runBursar(["mcp-stdio"], env, lines.map((line) => `${line}\n`).join(""), run_timeout_ms);
  const answers = stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Answer);
  return { code, answers, stderr };
}

/** tools/calls the SDK's schema refuses, which the bridge forwards for the gate to decide. */
const unchecked_calls = [
  '{"jsonrpc":"2.0","id":70,"method":"tools/call","params":{"name":"create_order","arguments":{"amount":100,"currency":"INR"},"_meta":{"progressToken":null}}}',
  '{"jsonrpc":"2.0","id":72,"method":"tools/call","params":"x"}',
  '{"jsonrpc":"2.0","id":73,"method":"tools/call","params":{"name":"get_block","arguments":{},"_meta":5}}',
];

describe("bursar mcp-stdio: answers a tools/call the SDK's schema refuses when it must answer it itself", () => {
  let server: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
  });
  afterAll(async () => server.close());

  it("answers each one when the gate is unreachable, as it answers a well-formed call", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const well_formed = '{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"get_block","arguments":{}}}';
    const piped = await pipe([...unchecked_calls, well_formed], { BURSAR_URL: url, BURSAR_AGENT_TOKEN: "bsr_agent_unreachable" });
    // Only id 71 was answered: the others' clients waited for ever.
    expect(piped.answers.map((answer) => answer.id).sort()).toEqual([70, 71, 72, 73]);
    for (const answer of piped.answers) {
      expect(answer.error).toMatchObject({ code: bridge_error_code, message: expect.stringContaining(`cannot reach the gate at ${url}/mcp`) });
    }
    expect(piped.code).toBe(0);
  });

  it("answers one when the gate refuses the token (HTTP 401), then exits 1", async () => {
    const piped = await pipe(['{"jsonrpc":"2.0","id":90,"method":"tools/call","params":"x"}'], {
      BURSAR_URL: server.url,
      BURSAR_AGENT_TOKEN: "bsr_agent_not_a_token_the_gate_issued",
    });
    // It exited 1 with nothing on stdout.
    expect(piped.answers).toEqual([{ jsonrpc: "2.0", id: 90, error: expect.objectContaining({ code: bridge_error_code, data: { http_status: 401 } }) }]);
    expect(piped.code).toBe(1);
  });

  it("answers one over the gate's body limit as not sent", async () => {
    const agent = await server.agent("oversized-unchecked");
    const padding = "p".repeat(message_bytes_max);
    const line = JSON.stringify({ jsonrpc: "2.0", id: 80, method: "tools/call", params: { name: "get_block", arguments: { padding }, _meta: 5 } });
    const piped = await pipe([line], { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(piped.answers).toHaveLength(1);
    expect(piped.answers[0]).toMatchObject({ id: 80, error: { code: bridge_error_code, message: expect.stringMatching(/over the gate's limit .*it was not sent/) } });
    expect(piped.code).toBe(0);
  });
});

/** A stand-in gate that holds every POST until `release` is called: the bridge's requests stay in flight. */
function holdingGate(): { server: Server; held: Array<{ id: unknown; response: ServerResponse }>; release(): void } {
  const held: Array<{ id: unknown; response: ServerResponse }> = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => held.push({ id: (JSON.parse(body) as { id?: unknown }).id, response }));
  });
  return {
    server,
    held,
    release() {
      for (const { id, response } of held.splice(0)) {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ jsonrpc: "2.0", id, result: { content: [] } }));
      }
    },
  };
}

it(`answers one past ${in_flight_max} requests in flight with an error instead of dropping it`, async () => {
  ensureBuilt();
  const gate = holdingGate();
  await new Promise<void>((resolve) => gate.server.listen(0, "127.0.0.1", resolve));
  const child = spawn(process.execPath, [bursar_bin, "mcp-stdio"], {
    env: { ...process.env, BURSAR_URL: `http://127.0.0.1:${(gate.server.address() as AddressInfo).port}`, BURSAR_AGENT_TOKEN: "bsr_agent_held" },
    stdio: ["pipe", "pipe", "pipe"],
    timeout: run_timeout_ms,
    killSignal: "SIGKILL",
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const answers = () => stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as Answer);
  try {
    for (let id = 1; id <= in_flight_max; id++) {
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "get_block", arguments: {} } })}\n`);
    }
    await waitUntil(`${in_flight_max} requests held at the gate`, () => gate.held.length === in_flight_max);
    child.stdin.write('{"jsonrpc":"2.0","id":999,"method":"tools/call","params":"x"}\n');
    // It was never answered: the bridge wrote the refusal only for a request the SDK's schema takes.
    await waitUntil("the answer to id 999", () => answers().some((answer) => answer.id === 999));
    expect(answers().find((answer) => answer.id === 999)?.error).toMatchObject({ code: bridge_error_code, message: `more than ${in_flight_max} requests in flight; it was not sent (nothing was carried out): send it again once an answer arrives` });
    gate.release();
    child.stdin.end();
    expect(await exited).toBe(0);
    expect(answers()).toHaveLength(in_flight_max + 1);
  } finally {
    child.kill("SIGKILL");
    gate.server.closeAllConnections();
    await new Promise((resolve) => gate.server.close(resolve));
  }
});

it("says nothing when stdin closes while the SDK's GET /mcp after notifications/initialized is in flight: no call was cut", async () => {
  ensureBuilt();
  // A stand-in gate whose GET never answers, so that stdin closes while it is in flight (the
  // real gate answers it 405 at once, which makes the moment a race).
  let gets = 0;
  const gate = createServer((request, response) => {
    if (request.method === "GET") return void gets++;
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      const message = JSON.parse(body) as { id?: unknown };
      if (message.id === undefined) return void response.writeHead(202).end();
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "stand-in", version: "1" } } }));
    });
  });
  await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve));
  const child = spawn(process.execPath, [bursar_bin, "mcp-stdio"], {
    env: { ...process.env, BURSAR_URL: `http://127.0.0.1:${(gate.address() as AddressInfo).port}`, BURSAR_AGENT_TOKEN: "bsr_agent_get" },
    stdio: ["pipe", "pipe", "pipe"],
    timeout: run_timeout_ms,
    killSignal: "SIGKILL",
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  try {
    const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "1" } } };
    child.stdin.write(`${JSON.stringify(initialize)}\n${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
    await waitUntil("the bridge's GET /mcp", () => gets === 1);
    child.stdin.end();
    expect(await exited).toBe(0);
    expect(JSON.parse(stdout.trim())).toMatchObject({ id: 1, result: { protocolVersion: "2025-06-18" } });
    // It was "the connection to the gate … broke before its answer (This operation was aborted); the call may have been carried out…".
    expect(stderr).toBe("");
  } finally {
    child.kill("SIGKILL");
    gate.closeAllConnections();
    await new Promise((resolve) => gate.close(resolve));
  }
});

it("keeps stderr to its own one-line diagnostics under 20 concurrent calls from an SDK client (no MaxListenersExceededWarning)", async () => {
  ensureBuilt();
  const server = await testServer();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bursar_bin, "mcp-stdio"],
    env: { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: (await server.agent("concurrent")).token },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: "concurrent", version: "1.0.0" });
  try {
    await client.connect(transport);
    const results = await Promise.all(Array.from({ length: 20 }, () => client.callTool({ name: "get_block", arguments: {} })));
    expect(results.every((result) => result.isError !== true)).toBe(true);
  } finally {
    await client.close();
    await server.close();
  }
  // It printed "(node:…) MaxListenersExceededWarning: Possible EventTarget memory leak detected. 11 abort listeners added to [AbortSignal]…".
  expect(stderr).not.toContain("MaxListenersExceededWarning");
  for (const line of stderr.split("\n").filter((text) => text !== "")) expect(line).toMatch(/^bursar mcp-stdio: /);
});
