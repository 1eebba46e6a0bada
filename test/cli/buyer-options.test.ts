// `bursar buyer` refuses an option its mode does not take, before it connects anywhere: one line,
// exit 2. `--task` with `--scripted` was ignored, and the scripted basket ran as if it had been used.

import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

describe("bursar buyer options that go with the other mode", () => {
  beforeAll(() => ensureBuilt());

  it.each([
    [["--scripted", "--task", "buy a lamp"], "--task goes with --llm"],
    [["--llm", "--overspend"], "--overspend goes with --scripted"],
  ])("%j: %s, exit 2", async (options, message) => {
    // Nothing listens at the URL: the refusal comes before any connection.
    const result = await runBursar(["buyer", ...options, "--url", "http://127.0.0.1:9", "--token", "bsr_agent_unused"], { BURSAR_AGENT_TOKEN: "" });
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar buyer: ${message}`);
    expect(result.stdout).toBe("");
  });
});
