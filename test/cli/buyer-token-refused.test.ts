// `bursar buyer` with a token the gate refuses (401): one line saying the token was refused,
// naming where it came from, as `bursar mcp-stdio` words it; not "is `bursar serve` running?".

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

describe("bursar buyer with a refused agent token", () => {
  let server: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
  });
  afterAll(() => server.close());

  it("says BURSAR_AGENT_TOKEN was refused (HTTP 401), not that the gate is down, exit 1", async () => {
    const result = await runBursar(["buyer", "--scripted"], { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: "bsr_agent_wrong" });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^bursar buyer: the gate at ${server.url}/mcp answered HTTP 401: .*; the agent token \\(BURSAR_AGENT_TOKEN\\) was refused$`));
    expect(result.stderr).not.toContain("bursar serve");
    expect(result.stdout).toBe("");
  });

  it("says so over --stdio too, in one line, not that the gate may be down", async () => {
    const result = await runBursar(["buyer", "--scripted", "--stdio", "--url", server.url, "--token", "bsr_agent_wrong"], { BURSAR_AGENT_TOKEN: "" }, undefined, 60_000);
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^bursar buyer: the gate at ${server.url}/mcp answered HTTP 401: .*; the agent token \\(--token\\) was refused$`));
    expect(result.stderr).not.toContain("bursar serve");
    expect(result.stderr).not.toContain("MCP error");
    expect(result.stdout).toBe("");
  });

  it("names --token when the token came from the option", async () => {
    const result = await runBursar(["buyer", "--scripted", "--token", "bsr_agent_wrong"], { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: "" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("the agent token (--token) was refused");
  });
});
