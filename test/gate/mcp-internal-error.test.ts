// An error thrown inside a tools/call (a database failing under the gate) reaches the agent as a
// generic JSON-RPC internal error, never the database's own text, and is logged, scrubbed of
// secret-looking values, for the operator.

import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it, vi } from "vitest";
import { OperatorTokens } from "../../src/datadir.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { buildServer, loggerOptions } from "../../src/server/app.js";
import { internal_error_message, mcpRoutes } from "../../src/server/mcp.js";
import { logLines } from "../support/log.js";
import { rawToolCall } from "../support/server.js";

let bursar: Bursar | undefined;
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  await bursar?.close();
  app = undefined;
  bursar = undefined;
});

/** The gate's /mcp alone, on a loopback port, with the production logger writing to `log`. */
async function mcpServer(log: ReturnType<typeof logLines>) {
  bursar = await createBursar({ db: ":memory:" });
  const agent = await bursar.operator.createAgent({ name: "buyer" });
  await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
  app = await buildServer({
    logger: { ...(loggerOptions("info") as object), stream: log.stream },
    plugins: [mcpRoutes({ operator: OperatorTokens.none(), ledger: bursar.ledger }, bursar.gate)],
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { b: bursar, url, agent };
}

describe("an internal error inside a tools/call", () => {
  it("answers -32603 with a generic message, not the database's text, and logs the error with its code", async () => {
    const log = logLines();
    const { b, url, agent } = await mcpServer(log);
    const database_text = "SQLITE_IOERR_WRITE: disk I/O error writing reservations (res_secretish)";
    vi.spyOn(b.ledger, "authorize").mockRejectedValueOnce(Object.assign(new Error(database_text), { code: "SQLITE_IOERR_WRITE" }));
    const answer = await rawToolCall(url, agent.token, "create_order", '{"amount": 5000, "currency": "INR"}');
    const reply = JSON.parse(answer.text) as { id: number; error?: { code: number; message: string } };
    // The SDK sent {"code":-32603,"message":"SQLITE_IOERR_WRITE: disk I/O error …"} and logged nothing.
    expect(reply).toEqual({ jsonrpc: "2.0", id: 1, error: { code: -32603, message: internal_error_message } });
    expect(reply.error?.message).toMatch(/^internal error/);
    const lines = log
      .text()
      .split("\n")
      .filter((line) => line.includes('"tool call failed"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, err: { message: database_text, code: "SQLITE_IOERR_WRITE" }, tool: "create_order", agent_id: agent.agent_id });
    // The arguments are not logged.
    expect(JSON.stringify(lines[0])).not.toContain('"amount"');
  });

  it("never writes a secret-looking value an error message quotes to the log, nor to the agent", async () => {
    const log = logLines();
    const { b, url, agent } = await mcpServer(log);
    vi.spyOn(b.ledger, "authorize").mockRejectedValueOnce(new Error(`invalid input syntax for type json: "${agent.token}"`));
    const answer = await rawToolCall(url, agent.token, "create_order", '{"amount": 5000, "currency": "INR"}');
    expect(JSON.parse(answer.text)).toMatchObject({ error: { code: -32603, message: internal_error_message } });
    expect(log.text()).toContain('"tool call failed"');
    expect(log.text()).toContain("[redacted]");
    expect(log.text()).not.toContain(agent.token);
  });

  it("a call the gate answers still gets its result: only a thrown error becomes -32603", async () => {
    const log = logLines();
    const { url, agent } = await mcpServer(log);
    const answer = await rawToolCall(url, agent.token, "create_order", '{"amount": 5000, "currency": "INR", "transfers": []}');
    expect(JSON.parse(answer.text)).toMatchObject({ result: { isError: true, structuredContent: { effect: "BLOCK", rule: "R0" } } });
    expect(log.text()).not.toContain('"tool call failed"');
  });
});
