// Every `--help` of the commands in test/cli documents each option the command parses and
// each environment variable it reads; the compiled binary prints it on stdout with exit 0.

import { beforeAll, describe, expect, it } from "vitest";
import * as admin from "../../src/cli/commands/admin.js";
import * as agent from "../../src/cli/commands/agent.js";
import * as bench from "../../src/cli/commands/bench.js";
import * as block from "../../src/cli/commands/block.js";
import * as export_log from "../../src/cli/commands/export.js";
import * as mcp_stdio from "../../src/cli/commands/mcp-stdio.js";
import * as migrate from "../../src/cli/commands/migrate.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

const table = [
  { name: "mcp-stdio", module: mcp_stdio, options: Object.keys(mcp_stdio.mcp_stdio_options), env: ["BURSAR_AGENT_TOKEN", "BURSAR_URL"] },
  { name: "agent", module: agent, options: Object.keys(agent.agent_options), env: ["BURSAR_URL", "BURSAR_ADMIN_TOKEN"] },
  { name: "block", module: block, options: Object.keys(block.block_options), env: ["BURSAR_URL", "BURSAR_ADMIN_TOKEN"] },
  { name: "admin", module: admin, options: [], env: ["BURSAR_DATA_DIR", "BURSAR_ADMIN_TOKEN"] },
  { name: "migrate", module: migrate, options: [], env: ["BURSAR_DATA_DIR", "BURSAR_DB"] },
  {
    name: "export",
    module: export_log,
    options: Object.keys(export_log.export_options),
    env: ["BURSAR_DB", "BURSAR_PG_PREPARED_STATEMENTS", "BURSAR_DATA_DIR", "BURSAR_SIGNING_KEY", "BURSAR_LOG_ORIGIN", "BURSAR_AUDITOR_TOKEN", "BURSAR_ADMIN_TOKEN"],
  },
  { name: "bench", module: bench, options: [], env: ["BENCH_SECONDS", ...bench.bench_names] },
];

describe("CLI --help", () => {
  beforeAll(() => ensureBuilt());

  it.each(table)("bursar $name --help documents every option and environment variable", async ({ name, module, options, env }) => {
    const result = await runBursar([name, "--help"], { BURSAR_AGENT_TOKEN: "", BURSAR_ADMIN_TOKEN: "" });
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe(`${module.help.trim()}\n`);
    expect(result.stdout).toContain(`usage: bursar ${name}`);
    for (const option of options) expect(result.stdout, `--${option}`).toContain(`--${option}`);
    for (const variable of env) expect(result.stdout, variable).toContain(variable);
  });

  it("bursar --help names each agent action, disable included", async () => {
    const result = await runBursar(["--help"]);
    expect(result.code).toBe(0);
    const line = result.stdout.split("\n").find((text) => /^\s+agent\s/.test(text));
    expect(line).toContain("agent create --name NAME");
    expect(line).toContain("disable ID");
    for (const action of ["agent create", "agent disable"]) expect(agent.help, action).toContain(`bursar ${action}`);
  });
});
