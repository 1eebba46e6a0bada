// The scripted buyer against a real `bursar serve` process: the basket over HTTP and over
// stdio, and --overspend meeting at least six distinct rules with the invariant intact.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBuilt } from "../support/build.js";
import { runBursar, startBursar, type BursarProcess } from "../support/process.js";

const admin = "buyer-test-operator-token-0123";

describe("bursar buyer --scripted", () => {
  let dir: string;
  let gate: BursarProcess;
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-buyer-"));
    gate = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: dir, BURSAR_ADMIN_TOKEN: admin });
  });
  afterAll(async () => {
    await gate?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function agentWithBlock(name: string): Promise<{ token: string; block_id: string }> {
    const post = async (path: string, body: unknown) =>
      (await (await fetch(`${gate.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" }, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const agent = await post("/api/v1/agents", { name });
    const block = await post("/api/v1/blocks", { agent_id: agent.agent_id, currency: "INR" });
    return { token: agent.token as string, block_id: block.block_id as string };
  }

  it("--overspend prints at least six distinct rule ids and leaves the invariant intact", async () => {
    const agent = await agentWithBlock("overspender");
    const run = await runBursar(["buyer", "--scripted", "--overspend", "--url", gate.url, "--token", agent.token, "--operator-token", admin]);
    expect(run.code, run.stderr).toBe(0);
    const rules = /rules: (.*)$/m.exec(run.stdout)?.[1]?.split(", ") ?? [];
    for (const rule of ["R0", "R1", "CALLER", "R4", "R5", "R6", "R7"]) expect(rules).toContain(rule);
    for (const rule of ["R5", "R0", "CALLER", "R7", "R1", "R6", "R4"]) expect(run.stdout).toMatch(new RegExp(`BLOCK\\s+.*: ${rule} — `));
    const block = (await (await fetch(`${gate.url}/api/v1/blocks/${agent.block_id}`, { headers: { authorization: `Bearer ${admin}` } })).json()) as { spent: number; held: number; reserved: number; revoked: boolean };
    expect(block.spent + block.held).toBeLessThanOrEqual(block.reserved);
    expect(block.revoked).toBe(true);
    expect(run.stdout).not.toContain("not reached");
  });

  it("--overspend after a --scripted run of the same agent names the rules it did not reach, and why", async () => {
    // As the README's Buyers section runs them: the basket first, then --overspend with the same
    // agent, whose basket calls still count in its velocity window (10 per 60 s by default).
    const agent = await agentWithBlock("basket-then-overspend");
    const basket = await runBursar(["buyer", "--scripted", "--url", gate.url, "--token", agent.token]);
    expect(basket.code, basket.stderr).toBe(0);
    const run = await runBursar(["buyer", "--scripted", "--overspend", "--url", gate.url, "--token", agent.token, "--operator-token", admin]);
    expect(run.code, run.stderr).toBe(0);
    const rules = /rules: (.*)$/m.exec(run.stdout)?.[1]?.split(", ") ?? [];
    const missed = ["CALLER", "R0", "R1", "R4", "R5", "R6", "R7"].filter((rule) => !rules.includes(rule));
    expect(missed.length).toBeGreaterThan(0);
    expect(run.stdout).toContain(`not reached: ${missed.join(", ")} (their attempts were refused by another rule first (see above): this agent's earlier calls still count in its velocity window (R6)`);
    expect(run.stdout).toMatch(/run it with a fresh agent and block\n$/);
  });

  it("buys the basket over stdio through bursar mcp-stdio", async () => {
    const agent = await agentWithBlock("stdio-buyer");
    const run = await runBursar(["buyer", "--scripted", "--stdio", "--url", gate.url, "--token", agent.token]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/3 allowed, 1 held, 0 refused/);
  });

  it("explains a missing token and a missing model configuration", async () => {
    const no_token = await runBursar(["buyer", "--scripted", "--url", gate.url], { BURSAR_AGENT_TOKEN: "" });
    expect(no_token.code).toBe(2);
    expect(no_token.stderr).toMatch(/agent token is required/);
    const no_llm = await runBursar(["buyer", "--llm", "--token", "x"], { BURSAR_LLM_API_KEY: "", BURSAR_LLM_BASE_URL: "", BURSAR_LLM_MODEL: "" });
    expect(no_llm.code).toBe(2);
    expect(no_llm.stderr).toMatch(/BURSAR_LLM_BASE_URL, BURSAR_LLM_API_KEY, BURSAR_LLM_MODEL/);
  });
});
