// A secret a command takes from the environment that holds only whitespace is refused, as
// `bursar serve` refuses one (config.ts `secret`): one line naming the variable, never the value,
// exit 2, before anything is sent or started — not taken for a key, nor a token, nor "not set".

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { builtSuiteDir } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { ndjson, record } from "../ingest/support.js";

const dir = builtSuiteDir("bursar-blank-secrets-");
const blanks = [" ", "\t", " \n "];

/** Every run is killed after 5 s: a command that took the blank secret would connect or listen. */
const briefly = (args: string[], env: Record<string, string>) => runBursar(args, env, "", 5_000);

function refusedLine(result: { code: number | null; stdout: string; stderr: string }, command: string, variable: string): void {
  expect({ code: result.code, stderr: result.stderr, stdout: result.stdout }).toEqual({
    code: 2,
    stderr: `bursar ${command}: ${variable}: only whitespace; expected the secret itself, or leave it unset\n`,
    stdout: "",
  });
}

describe("a secret variable of only whitespace is a usage error naming it, exit 2", () => {
  it.each(blanks)("send-decisions refuses BURSAR_SOURCE_SIGNING_KEY=%j before sending anything", async (blank) => {
    const file = join(dir(), "decisions.jsonl");
    writeFileSync(file, ndjson([record("evt_blank_key")]));
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await briefly(["send-decisions", file, "--url", url, "--source", "src_x"], { BURSAR_SOURCE_SIGNING_KEY: blank });
    refusedLine(result, "send-decisions", "BURSAR_SOURCE_SIGNING_KEY");
  });

  it.each(blanks)("buyer --llm refuses BURSAR_LLM_API_KEY=%j before calling the gate or the model", async (blank) => {
    const port = await freePort();
    const result = await briefly(["buyer", "--llm", "--url", `http://127.0.0.1:${port}`, "--token", "bsr_agent_x"], {
      BURSAR_LLM_BASE_URL: `http://127.0.0.1:${port}/v1`,
      BURSAR_LLM_API_KEY: blank,
      BURSAR_LLM_MODEL: "m",
    });
    refusedLine(result, "buyer", "BURSAR_LLM_API_KEY");
  });

  it.each(blanks)("buyer refuses BURSAR_AGENT_TOKEN=%j rather than send it to the gate", async (blank) => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await briefly(["buyer", "--scripted", "--url", url], { BURSAR_AGENT_TOKEN: blank });
    refusedLine(result, "buyer", "BURSAR_AGENT_TOKEN");
  });

  it("buyer refuses a --token of only whitespace the same way, naming --token", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await briefly(["buyer", "--scripted", "--url", url, "--token", " "], { BURSAR_AGENT_TOKEN: "" });
    expect({ code: result.code, line: result.stderr.split("\n")[0] }).toEqual({ code: 2, line: "bursar buyer: --token: only whitespace; expected the agent token itself" });
  });

  it.each(blanks)("simulator refuses RAZORPAY_WEBHOOK_SECRET=%j instead of signing webhooks with it", async (blank) => {
    const result = await briefly(["simulator", "--port", "0"], { RAZORPAY_WEBHOOK_SECRET: blank });
    refusedLine(result, "simulator", "RAZORPAY_WEBHOOK_SECRET");
  });

  it("simulator refuses a --webhook-secret of only whitespace, naming it", async () => {
    const result = await briefly(["simulator", "--port", "0", "--webhook-secret", " "], { RAZORPAY_WEBHOOK_SECRET: "" });
    expect({ code: result.code, line: result.stderr.split("\n")[0], stdout: result.stdout }).toEqual({
      code: 2,
      line: "bursar simulator: --webhook-secret: only whitespace; expected the secret itself",
      stdout: "",
    });
  });

  // Already refused before this file was written (mcp-stdio checks the token's shape); kept so the
  // bridge stays in line with the commands above.
  it.each(blanks)("mcp-stdio refuses BURSAR_AGENT_TOKEN=%j naming it, exit 2", async (blank) => {
    const result = await briefly(["mcp-stdio", "--url", `http://127.0.0.1:${await freePort()}`], { BURSAR_AGENT_TOKEN: blank });
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: "" });
    expect(result.stderr).toMatch(/^bursar mcp-stdio: BURSAR_AGENT_TOKEN[ :][^\n]*\n$/);
  });
});
