// `bursar mcp-stdio` end to end: an MCP SDK stdio client spawns the compiled bridge, which
// forwards to a real in-process gate; plus the bridge's failure modes and its exit on stdin close.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bridge_error_code } from "../../src/cli/commands/mcp-stdio.js";
import { tool_declarations } from "../../src/gate/tools.js";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

/** StdioClientTransport.close() waits this long for a voluntary exit before SIGTERM. */
const client_close_grace_ms = 2_000;

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "1" } },
};
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };

interface Piped {
  code: number | null;
  messages: Array<{ id?: number; result?: Record<string, unknown>; error?: { code: number; message: string } }>;
  stdout: string;
  stderr: string;
}

/** Writes the messages to a bridge's stdin, closes it, and collects everything it printed. */
async function pipeThroughBridge(messages: unknown[], env: Record<string, string>): Promise<Piped> {
  const input = messages.map((message) => `${JSON.stringify(message)}\n`).join("");
  const { code, stdout, stderr } = await runBursar(["mcp-stdio"], env, input);
  const lines = stdout.split("\n").filter((line) => line !== "");
  return { code, messages: lines.map((line) => JSON.parse(line) as Piped["messages"][number]), stdout, stderr };
}

describe("bursar mcp-stdio", () => {
  let server: TestServer;
  let scratch: string;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
    scratch = mkdtempSync(join(tmpdir(), "bursar-stdio-"));
  });
  afterAll(async () => {
    await server.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("bridges an SDK stdio client to the gate: tools, an ALLOW, and a refusal with its rule", async () => {
    const agent = await server.agent("stdio-buyer", { per_call_cap: 60_000 });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [bursar_bin, "mcp-stdio"],
      env: { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token },
      stderr: "pipe",
    });
    const client = new Client({ name: "stdio-test", version: "1.0.0" });
    await client.connect(transport);

    const tools = await client.listTools();
    expect(tools.tools.map((tool) => tool.name).sort()).toEqual(tool_declarations.map((tool) => tool.name).sort());

    const allowed = await client.callTool({ name: "create_order", arguments: { amount: 50_000, currency: "INR" } });
    expect(allowed.isError).toBeFalsy();
    expect(allowed.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 50_000, currency: "INR" } });

    const refused = await client.callTool({ name: "create_order", arguments: { amount: 70_000, currency: "INR" } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R5" });
    expect(JSON.stringify(refused.content)).toContain("R5");

    // The calls really reached this gate's ledger under this agent's block.
    const block = await server.started.bursar.ledger.getBlock(agent.block_id);
    expect(block.held + block.spent).toBe(50_000);

    // Closing the client closes the bridge's stdin: it exits on its own, without a signal.
    const started_ms = Date.now();
    await client.close();
    expect(Date.now() - started_ms).toBeLessThan(client_close_grace_ms);
  });

  it("answers piped requests after stdin closes, prints only protocol on stdout, exits 0 and never opens the data directory", async () => {
    const agent = await server.agent("pipe-buyer");
    const data_dir = join(scratch, "never-created");
    const piped = await pipeThroughBridge(
      [initialize, initialized, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "get_block", arguments: {} } }],
      { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token, BURSAR_DATA_DIR: data_dir, BURSAR_DB: "" },
    );
    expect(piped.code).toBe(0);
    expect(piped.messages.map((message) => message.id).sort()).toEqual([1, 2]);
    for (const message of piped.messages) expect(message).toHaveProperty("jsonrpc", "2.0");
    const block = piped.messages.find((message) => message.id === 2)?.result?.structuredContent;
    expect(block).toMatchObject({ block_id: agent.block_id, available: 1_000_000 });
    expect(existsSync(data_dir)).toBe(false);
  });

  it("answers with a JSON-RPC error and exits 1 when the gate refuses the token", async () => {
    const piped = await pipeThroughBridge([initialize], { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: "bsr_agent_not-a-real-token" });
    expect(piped.code).toBe(1);
    expect(piped.messages).toEqual([{ jsonrpc: "2.0", id: 1, error: { code: bridge_error_code, message: expect.stringContaining("HTTP 401"), data: { http_status: 401 } } }]);
    expect(piped.stderr).toContain("HTTP 401");
  });

  it("answers each request with an error naming the URL when the gate is unreachable, and keeps running", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const piped = await pipeThroughBridge([initialize, { jsonrpc: "2.0", id: 2, method: "tools/list" }], {
      BURSAR_URL: url,
      BURSAR_AGENT_TOKEN: "bsr_agent_anything",
    });
    expect(piped.code).toBe(0);
    expect(piped.messages.map((message) => message.id).sort()).toEqual([1, 2]);
    for (const message of piped.messages) expect(message.error?.message).toContain(`cannot reach the gate at ${url}/mcp`);
  });

  it("refuses to start without BURSAR_AGENT_TOKEN, with a message on stderr and nothing on stdout", async () => {
    const result = await runBursar(["mcp-stdio"], { BURSAR_AGENT_TOKEN: "", BURSAR_URL: server.url });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("BURSAR_AGENT_TOKEN is not set");
    expect(result.stdout).toBe("");
  });
});
