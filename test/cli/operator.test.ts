// `bursar agent create` and `bursar block create|show|revoke` as real processes against a real
// in-process server: every flag reaches the operator API, errors print the server's message.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { operator_token, rawToolCall, testServer, type TestServer } from "../support/server.js";

describe("bursar agent and bursar block", () => {
  let server: TestServer;
  let env: Record<string, string>;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
    env = { BURSAR_URL: server.url, BURSAR_ADMIN_TOKEN: operator_token };
  });
  afterAll(() => server.close());

  it("creates an agent and a block whose every limit the gate then enforces", async () => {
    const agent_run = await runBursar(["agent", "create", "--name", "cli-buyer"], env);
    expect(agent_run.code).toBe(0);
    const agent = JSON.parse(agent_run.stdout) as { agent_id: string; name: string; token: string };
    expect(agent).toMatchObject({ name: "cli-buyer", agent_id: expect.stringMatching(/^agt_/) });
    expect(agent_run.stderr).toContain(`export BURSAR_AGENT_TOKEN=${agent.token}`);
    expect(agent_run.stderr).toContain('"mcp-stdio"');
    expect(agent_run.stderr).toContain(`"BURSAR_URL": "${server.url}"`);

    const flags = ["--reserved", "100000", "--ttl-seconds", "3600", "--per-call-cap", "60000", "--approval-threshold", "50000"];
    const velocity = ["--max-calls", "5", "--window-seconds", "120"];
    const block_run = await runBursar(["block", "create", "--agent", agent.agent_id, "--currency", "INR", ...flags, ...velocity], env);
    expect(block_run.code).toBe(0);
    const block = JSON.parse(block_run.stdout) as { block_id: string; expires_at: string };
    expect(block).toMatchObject({
      agent_id: agent.agent_id,
      currency: "INR",
      reserved: 100_000,
      per_call_cap: 60_000,
      approval_threshold: 50_000,
      velocity: { max_calls: 5, window_seconds: 120 },
      revoked: false,
    });
    const lifetime_s = (Date.parse(block.expires_at) - Date.now()) / 1000;
    expect(lifetime_s).toBeGreaterThan(3500);
    expect(lifetime_s).toBeLessThanOrEqual(3600);

    const client = await server.client(agent.token);
    const buy = async (amount: number) =>
      (await client.callTool({ name: "create_order", arguments: { amount, currency: "INR" } })).structuredContent as { effect: string; rule?: string };
    expect(await buy(40_000)).toMatchObject({ effect: "ALLOW" });
    expect(await buy(55_000)).toMatchObject({ effect: "HOLD" });
    expect(await buy(70_000)).toMatchObject({ effect: "BLOCK", rule: "R5" });

    const show = await runBursar(["block", "show", block.block_id], env);
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ block_id: block.block_id, held: 95_000 });

    const again = await runBursar(["block", "create", "--agent", agent.agent_id, "--currency", "INR"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/bursar block create: HTTP 409 \S+: .*already has an active block/);
    expect(again.stdout).toBe("");

    const revoke = await runBursar(["block", "revoke", block.block_id, "--token", operator_token], { ...env, BURSAR_ADMIN_TOKEN: "" });
    expect(revoke.code).toBe(0);
    expect(JSON.parse(revoke.stdout)).toMatchObject({ block_id: block.block_id, revoked: true });
    expect(await buy(1_000)).toMatchObject({ effect: "BLOCK", rule: "R4" });
  });

  it("prints the server's error and exits 1 for a wrong token, an unknown block or an unreachable server", async () => {
    const wrong = await runBursar(["agent", "create", "--name", "x"], { ...env, BURSAR_ADMIN_TOKEN: "not-the-operator-token" });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("HTTP 401");
    expect(wrong.stderr).toContain("operator token is not valid");

    const missing = await runBursar(["block", "show", "blk_missing"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("HTTP 404");

    const url = `http://127.0.0.1:${await freePort()}`;
    const down = await runBursar(["agent", "create", "--name", "x", "--url", url], env);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`cannot reach ${url}`);
  });

  it("disables an agent: its token then gets 401 at /mcp; an unknown agent prints the server's 404", async () => {
    const agent = await server.agent("to-disable");
    const run = await runBursar(["agent", "disable", agent.agent_id], env);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ agent_id: agent.agent_id, name: "to-disable", disabled_at: expect.any(String) });
    expect((await rawToolCall(server.url, agent.token, "get_block", "{}")).status).toBe(401);
    const unknown = await runBursar(["agent", "disable", "agt_nobody"], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/bursar agent disable: HTTP 404 not_found: no agent agt_nobody/);
    const usage = await runBursar(["agent", "disable"], env);
    expect(usage.code).toBe(2);
  });

  it("exits 2 without calling the server for missing or contradictory arguments", async () => {
    const cases: Array<{ args: string[]; env?: Record<string, string>; message: string }> = [
      { args: ["agent", "create", "--name", "x"], env: { BURSAR_ADMIN_TOKEN: "" }, message: "no operator token" },
      { args: ["agent", "create"], message: "--name is required" },
      { args: ["block", "create", "--currency", "INR"], message: "--agent is required" },
      { args: ["block", "create", "--agent", "agt_x", "--currency", "INR", "--ttl-seconds", "60", "--expires-at", "2030-01-01T00:00:00Z"], message: "not both" },
      { args: ["block", "create", "--agent", "agt_x", "--currency", "INR", "--reserved", "1e5"], message: '--reserved "1e5"' },
      { args: ["block", "show"], message: "expected: block show ID" },
    ];
    for (const item of cases) {
      const result = await runBursar(item.args, { ...env, ...item.env });
      expect(result.code, item.args.join(" ")).toBe(2);
      expect(result.stderr).toContain(item.message);
    }
  });
});
