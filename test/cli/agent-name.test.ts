// `bursar agent create --name`: a missing name says it is required; a name over the limit says
// how long it is and what the limit is. Both exit 2 before any call to the server.

import { describe, expect, it } from "vitest";
import { agent_name_length_max } from "../../src/policy/limits.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

/** No operator token: a name that passes its check stops at the token, never at a server. */
const env = { BURSAR_ADMIN_TOKEN: "" };

describe("bursar agent create --name", () => {
  ensureBuilt();

  it.each([200, agent_name_length_max + 1])("a %i-character name is refused naming its length and the limit, exit 2", async (length) => {
    const result = await runBursar(["agent", "create", "--name", "n".repeat(length)], env);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar agent: --name: ${length} characters; at most ${agent_name_length_max}`);
  });

  it("a name of exactly the limit passes the name check", async () => {
    const result = await runBursar(["agent", "create", "--name", "n".repeat(agent_name_length_max)], env);
    expect(result.code).toBe(2);
    expect(result.stderr).not.toContain("--name");
    expect(result.stderr).toContain("no operator token");
  });

  it.each([[["agent", "create"]], [["agent", "create", "--name", ""]]])("%j says --name is required, exit 2", async (args) => {
    const result = await runBursar(args, env);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar agent: --name is required (1 to ${agent_name_length_max} characters)`);
  });
});
