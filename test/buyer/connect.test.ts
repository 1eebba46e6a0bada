// The stdio bridge a buyer starts holds the agent token and nothing else of the buyer's
// environment: not the operator token, nor a model's API key.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { connect } from "../../src/buyer/connect.js";

const scratch = mkdtempSync(join(tmpdir(), "bursar-connect-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("connect over stdio", () => {
  it("starts the bridge with the agent token and the default environment only", async () => {
    const seen = join(scratch, "env.json");
    // Stands in for bin.js: writes the environment it was given, then exits (the connect fails).
    const bin = join(scratch, "bin.mjs");
    writeFileSync(bin, `import { writeFileSync } from "node:fs"; writeFileSync(${JSON.stringify(seen)}, JSON.stringify(process.env));`);
    process.env.BURSAR_LLM_API_KEY = "sk-llm-key-of-the-buyer";
    process.env.BURSAR_ADMIN_TOKEN = "bsr_op_operator-token-of-the-buyer";
    try {
      await expect(connect({ kind: "stdio", url: "http://127.0.0.1:9", token: "bsr_agent_the-agent-token", bin })).rejects.toThrow();
    } finally {
      delete process.env.BURSAR_LLM_API_KEY;
      delete process.env.BURSAR_ADMIN_TOKEN;
    }
    const env = JSON.parse(readFileSync(seen, "utf8")) as Record<string, string>;
    expect(env.BURSAR_AGENT_TOKEN).toBe("bsr_agent_the-agent-token");
    expect(env).not.toHaveProperty("BURSAR_LLM_API_KEY");
    expect(env).not.toHaveProperty("BURSAR_ADMIN_TOKEN");
    expect(env.PATH).toBe(process.env.PATH);
  });
});
