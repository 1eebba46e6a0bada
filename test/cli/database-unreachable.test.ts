// Every command that opens the database reports a PostgreSQL server it cannot reach as
// `bursar serve` does (docs/configuration.md): one line on stderr naming BURSAR_DB with its
// password masked, exit 2; never the password, never a pg-pool stack trace.

import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { postgresServerUrl, schemaUrl } from "../support/backends.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const password = "supersecret";
/** Port 1 on loopback: nothing listens there, so the connection is refused at once. */
const unreachable = `postgres://u:${password}@127.0.0.1:1/x`;

describe("a PostgreSQL BURSAR_DB that cannot be reached", () => {
  const dir = builtSuiteDir("bursar-db-unreachable-");

  const commands = [
    { name: "migrate", args: ["migrate"] },
    { name: "export", args: ["export", "--out", "export.jsonl"] },
    { name: "serve", args: ["serve", "--port", "0"] },
  ];

  it.each(commands)("bursar $name prints one line naming BURSAR_DB without its password, and exits 2", async ({ name, args }) => {
    const data_dir = join(dir(), name);
    const result = await runBursar(
      args.map((arg) => (arg === "export.jsonl" ? join(dir(), "export.jsonl") : arg)),
      { BURSAR_DATA_DIR: data_dir, BURSAR_DB: unreachable, BURSAR_ADMIN_TOKEN: "x".repeat(20) },
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`bursar ${name}: BURSAR_DB=postgres://u:***@127.0.0.1:1/x: cannot reach PostgreSQL (connect ECONNREFUSED 127.0.0.1:1)\n`);
    expect(`${result.stdout}${result.stderr}`).not.toContain(password);
    expect(result.stdout).toBe("");
  });
});

describe("a PostgreSQL BURSAR_DB whose search_path names no existing schema", () => {
  const dir = builtSuiteDir("bursar-db-no-schema-");
  const server = postgresServerUrl();

  it.skipIf(server === undefined)("bursar migrate and serve print one line naming BURSAR_DB, and exit 2", async () => {
    const db = schemaUrl(server!, "bursar_no_such_schema");
    for (const args of [["migrate"], ["serve", "--port", "0"]]) {
      const result = await runBursar(args, { BURSAR_DATA_DIR: join(dir(), args[0]!), BURSAR_DB: db, BURSAR_ADMIN_TOKEN: "x".repeat(20) });
      // Was "bursar: Error: PostgreSQL: …" with a stack trace, exit 1.
      expect(result.stderr).toBe(`bursar ${args[0]}: BURSAR_DB=${db}: the search_path names no existing schema; create it first (CREATE SCHEMA …), or name one that exists\n`);
      expect(result.code).toBe(2);
    }
  });
});
