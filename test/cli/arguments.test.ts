// Argument and configuration mistakes end in one line that names the option or variable and
// its rule (exit 2), never a stack trace, a silent default or a secret it was given; an
// unreachable gate is one line (exit 1).

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, databaseError, loadConfig } from "../../src/config.js";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { providerInUse } from "../../src/cli/commands/serve.js";
import { freePort, runBursar, startBursar } from "../support/process.js";

beforeAll(() => ensureBuilt());

/** `bursar serve` that, if it wrongly starts listening, is killed after 5 s instead of hanging the test. */
function serveBriefly(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bursar_bin, "serve", ...args], { env: { ...process.env, ...env }, timeout: 5000 }, (_error, stdout, stderr) =>
      resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

const data_dirs: string[] = [];
afterAll(() => {
  for (const dir of data_dirs) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "bursar-args-"));
  data_dirs.push(dir);
  return dir;
}

describe("configuration checked in loadConfig", () => {
  const table = [
    { variable: "BURSAR_LOG_LEVEL", value: "verbose", message: 'BURSAR_LOG_LEVEL="verbose": expected one of fatal, error, warn, info, debug, trace, silent' },
    { variable: "BURSAR_MASTER_KEY", value: "short", message: "BURSAR_MASTER_KEY: expected at least 16 characters" },
    { variable: "BURSAR_DB", value: "mysql://x/y", message: "BURSAR_DB: scheme mysql:// is not supported; expected a postgres:// URL or a SQLite file path" },
    { variable: "BURSAR_PG_PREPARED_STATEMENTS", value: "off", message: 'BURSAR_PG_PREPARED_STATEMENTS="off": expected 1 or true (on), or 0 (off)' },
    { variable: "BURSAR_ALLOW_LIVE", value: "yes", message: 'BURSAR_ALLOW_LIVE="yes": expected 1 or true (on), or 0 (off)' },
    { variable: "BURSAR_HOST", value: "a b", message: 'BURSAR_HOST="a b": expected a host name or IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0' },
    // An origin is shown in every checkpoint: a control or invisible character would make one read as another.
    { variable: "BURSAR_LOG_ORIGIN", value: "bursar.local\u0001log", message: "BURSAR_LOG_ORIGIN: must not contain U+0001 (invisible or control character); it is shown in every checkpoint and verify answer" },
    { variable: "BURSAR_LOG_ORIGIN", value: "prod\u200b.example/log", message: "BURSAR_LOG_ORIGIN: must not contain U+200B (invisible or control character); it is shown in every checkpoint and verify answer" },
    // A path of only whitespace named a file or directory " " in the working directory.
    { variable: "BURSAR_DB", value: " ", message: "BURSAR_DB: only whitespace; expected a SQLite file path or a postgres:// URL, or leave it unset" },
    { variable: "BURSAR_DATA_DIR", value: "\t", message: "BURSAR_DATA_DIR: only whitespace; expected a path, or leave it unset" },
    { variable: "BURSAR_SIGNING_KEY", value: "  ", message: "BURSAR_SIGNING_KEY: only whitespace; expected a path, or leave it unset" },
    // Whitespace around a path made it relative (" /srv/bursar" is "./ /srv/bursar"); around a URL the
    // parser trimmed it while the raw value was used (every provider call went to "/%20/v1/orders").
    ...[
      { variable: "BURSAR_DATA_DIR", value: " /srv/bursar", expected: "a path" },
      { variable: "BURSAR_SIGNING_KEY", value: "/srv/bursar/key.pem\n", expected: "a path" },
      { variable: "BURSAR_DB", value: "/srv/bursar/bursar.db ", expected: "a SQLite file path or a postgres:// URL" },
      { variable: "BURSAR_DB", value: " postgres://u:hunter2@127.0.0.1:1/x", expected: "a SQLite file path or a postgres:// URL" },
      { variable: "RAZORPAY_BASE_URL", value: " http://127.0.0.1:8788/ ", expected: "a URL" },
      { variable: "RAZORPAY_BASE_URL", value: "http://127.0.0.1:8788\t", expected: "a URL" },
    ].map(({ variable, value, expected }) => ({ variable, value, message: `${variable}: begins or ends with whitespace (the value is not shown); expected ${expected} without it` })),
    // A BURSAR_DB that looks like a URL but is not a postgres:// one was taken for a SQLite path,
    // created as a file, and shown password and all in the error about it.
    ...[
      "postgres:/u:hunter2@127.0.0.1:1/x",
      "postgresql:u:hunter2@127.0.0.1/x",
      "pg:/u:hunter2@127.0.0.1/x",
      "data/postgres://u:hunter2@127.0.0.1/x",
      "posgres ://u:hunter2@127.0.0.1/x",
    ].map((value) => ({
      variable: "BURSAR_DB",
      value,
      message:
        "BURSAR_DB: looks like a URL but is not a postgres:// URL (the value is not shown: it may hold a password); expected postgres://user:password@host:5432/database, or a SQLite file path",
    })),
    // Razorpay keys with the default provider ran the built-in simulator: payments taken for real were not.
    { variable: "RAZORPAY_KEY_ID", value: "rzp_test_x", message: "RAZORPAY_KEY_ID is set but BURSAR_PROVIDER is simulator: set BURSAR_PROVIDER=razorpay, or unset the RAZORPAY_KEY_* variables" },
    { variable: "RAZORPAY_KEY_SECRET", value: "secret", message: "RAZORPAY_KEY_SECRET is set but BURSAR_PROVIDER is simulator: set BURSAR_PROVIDER=razorpay, or unset the RAZORPAY_KEY_* variables" },
    // A URL's credentials, query or unparsable text that may hold them is never echoed.
    {
      variable: "RAZORPAY_BASE_URL",
      value: "https://rzp_test_x:hunter2@api.razorpay.com",
      message: "RAZORPAY_BASE_URL: a URL with user:password@ is refused (the value is not shown); credentials go in RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET",
    },
    { variable: "RAZORPAY_BASE_URL", value: "http://u:hunter2@127.0.0.1:8788/", message: "RAZORPAY_BASE_URL: a URL with user:password@ is refused (the value is not shown); credentials go in RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET" },
    { variable: "RAZORPAY_BASE_URL", value: "https://api.razorpay.com/?token=hunter2", message: "RAZORPAY_BASE_URL: expected a base URL without ?query or #fragment (the value is not shown), e.g. https://api.razorpay.com" },
    { variable: "RAZORPAY_BASE_URL", value: "https://api.razorpay.com#hunter2", message: "RAZORPAY_BASE_URL: expected a base URL without ?query or #fragment (the value is not shown), e.g. https://api.razorpay.com" },
    { variable: "RAZORPAY_BASE_URL", value: "http://u:hunter2@[::1", message: "RAZORPAY_BASE_URL: expected an http(s) URL" },
    // A secret of only whitespace is refused, not used (one space as a webhook secret lets anyone sign webhooks).
    { variable: "RAZORPAY_WEBHOOK_SECRET", value: " ", message: "RAZORPAY_WEBHOOK_SECRET: only whitespace; expected the secret itself, or leave it unset" },
    { variable: "RAZORPAY_WEBHOOK_SECRET_PREVIOUS", value: " ", message: "RAZORPAY_WEBHOOK_SECRET_PREVIOUS: only whitespace; expected the secret itself, or leave it unset" },
    { variable: "RAZORPAY_KEY_SECRET", value: "\t\n", message: "RAZORPAY_KEY_SECRET: only whitespace; expected the secret itself, or leave it unset" },
    { variable: "BURSAR_MASTER_KEY", value: " ".repeat(16), message: "BURSAR_MASTER_KEY: only whitespace; expected the secret itself, or leave it unset" },
    { variable: "BURSAR_ADMIN_TOKEN", value: " ".repeat(20), message: "BURSAR_ADMIN_TOKEN: only whitespace; expected the secret itself, or leave it unset" },
    // A postgres URL node-postgres cannot parse: one line naming BURSAR_DB, without the URL (it holds the password).
    ...["postgres://u:hunter2@127.0.0.1:99999/db", "postgres://u:hunter2@[::1/db", "postgresql://u:hunter2@host:port/db", "postgres://u:%E0%A4@127.0.0.1/db"].map((value) => ({
      variable: "BURSAR_DB",
      value,
      message:
        "BURSAR_DB: not a valid postgres:// URL (the value is not shown: it may hold a password); expected postgres://user:password@host:5432/database, with special characters in the password percent-encoded",
    })),
  ];

  it.each(table)("$variable=$value is refused naming the variable", ({ variable, value, message }) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(new ConfigError(message));
  });

  it.each(table)("bursar serve with $variable=$value prints one line and exits 2", async ({ variable, value, message }) => {
    const result = await serveBriefly(["--port", "0"], { BURSAR_DATA_DIR: dataDir(), [variable]: value });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`bursar serve: ${message}\n`);
  });

  it.each([["migrate"], ["export", "--out", "log.jsonl"]])("bursar %s refuses a BURSAR_DB that looks like a URL but is not a postgres:// one, without showing it", async (...args) => {
    const data_dir = dataDir();
    for (const db of [" postgres://u:hunter2@127.0.0.1:1/x", "postgres:/u:hunter2@127.0.0.1:1/x"]) {
      const result = await runBursar(args.map((arg) => (arg === "log.jsonl" ? join(data_dir, arg) : arg)), { BURSAR_DATA_DIR: data_dir, BURSAR_DB: db }, "", 10_000);
      expect({ code: result.code, stdout: result.stdout, lines: result.stderr.trimEnd().split("\n").length }).toEqual({ code: 2, stdout: "", lines: 1 });
      expect(result.stderr).toMatch(new RegExp(`^bursar ${args[0]}: BURSAR_DB: (begins or ends with whitespace|looks like a URL)`));
      expect(result.stderr).not.toContain("hunter2");
    }
  });

  it.each([["serve", "--port", "0"], ["migrate"], ["export", "--out", "log.jsonl"]])(
    "bursar %s with a BURSAR_DB whose ?sslrootcert= or ?sslkey= file cannot be read is one line naming BURSAR_DB (password masked) and the file, exit 2, not a stack",
    async (...args) => {
      const data_dir = dataDir();
      for (const parameter of ["sslrootcert", "sslkey"]) {
        const db = `postgres://u:hunter2@127.0.0.1:1/x?${parameter}=${join(data_dir, "missing.pem")}`;
        const result = await runBursar(args.map((arg) => (arg === "log.jsonl" ? join(data_dir, arg) : arg)), { BURSAR_DATA_DIR: data_dir, BURSAR_DB: db }, "", 10_000);
        expect({ code: result.code, stderr: result.stderr }).toEqual({
          code: 2,
          stderr: `bursar ${args[0]}: BURSAR_DB=postgres://u:***@127.0.0.1:1/x?${parameter}=${join(data_dir, "missing.pem")}: cannot read a file the URL names (ENOENT: no such file or directory, open '${join(data_dir, "missing.pem")}')\n`,
        });
      }
    },
  );

  it("bursar migrate with a BURSAR_DB whose ?sslrootcert= names a directory is one line too, exit 2, not a stack", async () => {
    const data_dir = dataDir();
    const db = `postgres://u:hunter2@127.0.0.1:1/x?sslrootcert=${data_dir}`;
    const result = await runBursar(["migrate"], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: db }, "", 10_000);
    expect({ code: result.code, stderr: result.stderr }).toEqual({
      code: 2,
      stderr: `bursar migrate: BURSAR_DB=postgres://u:***@127.0.0.1:1/x?sslrootcert=${data_dir}: cannot read a file the URL names (EISDIR: illegal operation on a directory, read)\n`,
    });
  });

  it("bursar simulator refuses a BURSAR_LOG_LEVEL pino does not know in one line, exit 2, as serve does (pino threw a stack)", async () => {
    const result = await runBursar(["simulator", "--port", "0", "--webhook-secret", "x"], { BURSAR_LOG_LEVEL: "LOUD" }, "", 10_000);
    expect({ code: result.code, stderr: result.stderr, stdout: result.stdout }).toEqual({
      code: 2,
      stderr: 'bursar simulator: BURSAR_LOG_LEVEL="LOUD": expected one of fatal, error, warn, info, debug, trace, silent\n',
      stdout: "",
    });
  });

  it("refuses RAZORPAY_WEBHOOK_SECRET_PREVIOUS equal to RAZORPAY_WEBHOOK_SECRET with the simulator too, as documented (it was ignored)", () => {
    expect(() => loadConfig({ RAZORPAY_WEBHOOK_SECRET: "whsec_same", RAZORPAY_WEBHOOK_SECRET_PREVIOUS: "whsec_same" })).toThrow(
      new ConfigError("RAZORPAY_WEBHOOK_SECRET_PREVIOUS equals RAZORPAY_WEBHOOK_SECRET (the value is not shown): set it to the secret the rotation replaced, or leave it unset"),
    );
    // The mounted simulator's own webhook secret alone is still taken.
    expect(loadConfig({ RAZORPAY_WEBHOOK_SECRET: "whsec_same" }).razorpay.webhook_secret).toBe("whsec_same");
  });

  it("bursar serve's listen line names the provider in use", async () => {
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: dataDir() });
    try {
      expect(server.stdout()).toContain(`bursar listening on ${server.url} (provider: simulator, built in: no real payments)\n`);
    } finally {
      await server.stop();
    }
    const razorpay = loadConfig({ BURSAR_PROVIDER: "razorpay", RAZORPAY_KEY_ID: "rzp_test_x", RAZORPAY_KEY_SECRET: "s", RAZORPAY_WEBHOOK_SECRET: "w" });
    expect(providerInUse(razorpay)).toBe("provider: razorpay at https://api.razorpay.com, test key");
  });

  it("accepts every pino level, a 16-character master key and postgres:// or file databases", () => {
    for (const level of ["fatal", "error", "warn", "info", "debug", "trace", "silent"]) expect(loadConfig({ BURSAR_LOG_LEVEL: level }).log_level).toBe(level);
    expect(loadConfig({ BURSAR_MASTER_KEY: "x".repeat(16) }).master_key).toBe("x".repeat(16));
    for (const db of ["postgres://u@h/d", "postgresql://u@h/d", ":memory:", "/tmp/b.db", "rel/b.db", "C:/bursar/b.db", "rel/a:b.db"]) expect(loadConfig({ BURSAR_DB: db }).db).toBe(db);
  });

  it("keeps secrets and base URLs that are merely unusual: spaces inside a secret, a path on the base URL, a user@/database postgres URL", () => {
    expect(loadConfig({ RAZORPAY_WEBHOOK_SECRET: " a secret " }).razorpay.webhook_secret).toBe(" a secret ");
    expect(loadConfig({ RAZORPAY_WEBHOOK_SECRET: "" }).razorpay.webhook_secret).toBeUndefined();
    expect(loadConfig({ RAZORPAY_BASE_URL: "http://127.0.0.1:8788/razorpay/" }).razorpay.base_url).toBe("http://127.0.0.1:8788/razorpay");
    for (const db of ["postgres://u@/d", "postgres://u:p%20w@h:5432/d?sslmode=disable", "postgres://u:p w@h/d", "postgres:///d"]) expect(loadConfig({ BURSAR_DB: db }).db).toBe(db);
  });

  it("a postgres URL that node-postgres still cannot parse at the first connection is the same one line, not a stack", () => {
    const invalid = Object.assign(new TypeError("Invalid URL"), { code: "ERR_INVALID_URL", input: "postgres://u:hunter2@h:x/d" });
    const reported = databaseError("postgres://u:hunter2@h/d", invalid);
    expect(reported).toBeInstanceOf(ConfigError);
    expect((reported as Error).message).toMatch(/^BURSAR_DB: not a valid postgres:\/\/ URL/);
    expect((reported as Error).message).not.toContain("hunter2");
  });

  it("prepares PostgreSQL statements unless BURSAR_PG_PREPARED_STATEMENTS=0", () => {
    expect(loadConfig({}).pg_prepared_statements).toBe(true);
    expect(loadConfig({ BURSAR_PG_PREPARED_STATEMENTS: "" }).pg_prepared_statements).toBe(true);
    expect(loadConfig({ BURSAR_PG_PREPARED_STATEMENTS: "1" }).pg_prepared_statements).toBe(true);
    expect(loadConfig({ BURSAR_PG_PREPARED_STATEMENTS: "0" }).pg_prepared_statements).toBe(false);
    expect(loadConfig({ BURSAR_PG_PREPARED_STATEMENTS: "true" }).pg_prepared_statements).toBe(true);
  });

  it("refuses a BURSAR_PORT fetch will not connect to: every client Bursar ships answered 'bad port'", () => {
    for (const port of ["6000", "6667", "10080"]) {
      expect(() => loadConfig({ BURSAR_PORT: port })).toThrow(
        new ConfigError(`BURSAR_PORT=${port}: fetch refuses to connect to this port (the Fetch standard's bad ports), so Bursar's own clients and browsers could not reach the server; choose another`),
      );
    }
    expect(loadConfig({ BURSAR_PORT: "6001" }).port).toBe(6001);
  });

  it("takes 1 or true, and 0, for BURSAR_ALLOW_LIVE, as its message says", () => {
    expect(loadConfig({}).allow_live).toBe(false);
    expect(loadConfig({ BURSAR_ALLOW_LIVE: "1" }).allow_live).toBe(true);
    expect(loadConfig({ BURSAR_ALLOW_LIVE: "true" }).allow_live).toBe(true);
    expect(loadConfig({ BURSAR_ALLOW_LIVE: "0" }).allow_live).toBe(false);
  });
});

describe("command arguments", () => {
  it.each(["", "abc", "65536", "-1"])("bursar serve --port %j is an error naming --port, not the default port", async (port) => {
    const result = await serveBriefly([`--port=${port}`], { BURSAR_DATA_DIR: dataDir() });
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar serve: --port ${JSON.stringify(port)}: expected an integer from 0 to 65535`);
    expect(result.stdout).not.toContain("listening");
  });

  it.each([["serve"], ["simulator", "--webhook-secret", "whsec_x"]])("bursar %s --port 6667 (a port fetch refuses) is one line naming --port, exit 2", async (...command) => {
    const result = await runBursar([...command, "--port", "6667"], { BURSAR_DATA_DIR: dataDir() }, undefined, 20_000);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar ${command[0]}: --port 6667: fetch refuses to connect to this port (the Fetch standard's bad ports), so Bursar's own clients and browsers could not reach the server; choose another`);
    expect(result.stdout).not.toContain("listening");
  });

  it.each(["", " ", "127.0.0.1 "])("bursar serve --host %j is an error naming --host, not the default address", async (host) => {
    // Before, an empty --host was dropped and the server listened on BURSAR_HOST or 127.0.0.1.
    const result = await serveBriefly([`--host=${host}`, "--port", "0"], { BURSAR_DATA_DIR: dataDir() });
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar serve: --host ${JSON.stringify(host)}: expected a host name or IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0`);
    expect(result.stdout).not.toContain("listening");
  });

  const operator_env = { BURSAR_ADMIN_TOKEN: "x".repeat(20) };
  const credential_urls: Array<{ args: string[]; env: Record<string, string>; name: string; credentials_in: string }> = [
    { args: ["mcp-stdio"], env: { BURSAR_AGENT_TOKEN: "bsr_agent_x", BURSAR_URL: "http://u:hunter2@127.0.0.1:1" }, name: "--url/BURSAR_URL", credentials_in: "BURSAR_AGENT_TOKEN" },
    { args: ["mcp-stdio", "--url", "http://u:hunter2@127.0.0.1:1/mcp"], env: { BURSAR_AGENT_TOKEN: "bsr_agent_x" }, name: "--url/BURSAR_URL", credentials_in: "BURSAR_AGENT_TOKEN" },
    { args: ["agent", "create", "--name", "a", "--url", "http://admin:hunter2@127.0.0.1:1"], env: operator_env, name: "--url/BURSAR_URL", credentials_in: "BURSAR_ADMIN_TOKEN (or --token)" },
    { args: ["block", "show", "blk_x"], env: { ...operator_env, BURSAR_URL: "https://hunter2@bursar.example" }, name: "--url/BURSAR_URL", credentials_in: "BURSAR_ADMIN_TOKEN (or --token)" },
    { args: ["buyer", "--scripted", "--url", "http://u:hunter2@127.0.0.1:1", "--token", "bsr_agent_x"], env: {}, name: "--url", credentials_in: "BURSAR_AGENT_TOKEN (or --token)" },
  ];
  it.each(credential_urls)("bursar $args.0 refuses a URL with user:password@ without showing it (fetch would repeat it to stderr)", async ({ args, env, name, credentials_in }) => {
    const result = await runBursar(args, env, "", 10_000);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar ${args[0]}: ${name}: a URL with user:password@ is refused (the value is not shown); credentials go in ${credentials_in}`);
    expect(result.stderr + result.stdout).not.toContain("hunter2");
  });

  it.each<{ args: string[]; env: Record<string, string>; name: string }>([
    { args: ["mcp-stdio"], env: { BURSAR_AGENT_TOKEN: "bsr_agent_x", BURSAR_URL: " http://127.0.0.1:1/ " }, name: "--url/BURSAR_URL" },
    { args: ["agent", "create", "--name", "a", "--url", "http://127.0.0.1:1/ "], env: operator_env, name: "--url/BURSAR_URL" },
    { args: ["buyer", "--scripted", "--url", " http://127.0.0.1:1", "--token", "bsr_agent_x"], env: {}, name: "--url" },
    { args: ["simulator", "--port", "0", "--webhook-secret", "w", "--webhook-url", "http://127.0.0.1:1/webhooks/razorpay\n"], env: {}, name: "--webhook-url" },
  ])("bursar $args.0 refuses a URL with whitespace around it (the parser trims it, the requests used it as given)", async ({ args, env, name }) => {
    const result = await runBursar(args, env, "", 10_000);
    expect({ code: result.code, stderr: result.stderr, stdout: result.stdout }).toEqual({
      code: 2,
      stderr: `bursar ${args[0]}: ${name}: begins or ends with whitespace (the value is not shown); expected a URL without it\n`,
      stdout: "",
    });
  });

  it("bursar agent shows an unparsable URL unless it holds an \"@\" (it may hold credentials)", async () => {
    const shown = await runBursar(["agent", "create", "--name", "a", "--url", "127.0.0.1:8787"], operator_env, "", 10_000);
    expect(shown.code).toBe(2);
    expect(shown.stderr.split("\n")[0]).toBe('bursar agent: --url/BURSAR_URL "127.0.0.1:8787": expected an http(s) URL');
    const hidden = await runBursar(["agent", "create", "--name", "a", "--url", "http://u:hunter2@[::1"], operator_env, "", 10_000);
    expect(hidden.code).toBe(2);
    expect(hidden.stderr.split("\n")[0]).toBe("bursar agent: --url/BURSAR_URL (the value is not shown): expected an http(s) URL");
  });

  it("bursar agent refuses a base URL with a query or fragment without showing it (its path would land in them)", async () => {
    for (const url of ["http://127.0.0.1:8787/?token=secret-in-query", "http://127.0.0.1:8787#frag"]) {
      const query = await runBursar(["agent", "create", "--name", "a", "--url", url], operator_env, "", 10_000);
      expect(query.code).toBe(2);
      expect(query.stderr.split("\n")[0]).toBe("bursar agent: --url/BURSAR_URL: a base URL has no query (?…) or fragment (#…) (the value is not shown), e.g. http://127.0.0.1:8787");
      expect(query.stderr).not.toContain("secret-in-query");
    }
  });

  it("bursar mcp-stdio sends a --url's query as given (a gateway may route or authenticate by it) and never prints it", async () => {
    const seen: string[] = [];
    const gateway = createServer((request, response) => {
      seen.push(request.url ?? "");
      request.resume();
      request.on("end", () => response.writeHead(401, { "content-type": "application/json" }).end('{"error":{"code":"unauthorized","message":"no"}}'));
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/gw?code=secret-in-query`;
      const initialize = `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } })}\n`;
      const result = await runBursar(["mcp-stdio", "--url", url], { BURSAR_AGENT_TOKEN: "bsr_agent_x0123456789abcdef" }, initialize, 20_000);
      expect(seen[0]).toBe("/gw/mcp?code=secret-in-query");
      expect(`${result.stdout}${result.stderr}`).toContain(`the gate at http://127.0.0.1:${(gateway.address() as AddressInfo).port}/gw/mcp?… answered HTTP 401`);
      expect(`${result.stdout}${result.stderr}`).not.toContain("secret-in-query");
    } finally {
      await new Promise((resolve) => gateway.close(resolve));
    }
  });

  it.each(["demo", "eval", "mutate", "migrate", "buyer"])("bursar %s refuses an argument it takes none of, instead of ignoring it", async (command) => {
    const result = await runBursar([command, "extra"], { BURSAR_DATA_DIR: dataDir() });
    expect(result.stderr.split("\n")[0]).toBe(`bursar ${command}: unexpected argument "extra"`);
    expect(result.code).toBe(2);
  });

  it.each([
    ["buyer", ["buyer", "--scripted", "--url", "http://127.0.0.1:9", "--token", "bsr_agent_SECRET0123456789abcdef\r\nX"], "--token", "agent token"],
    ["buyer", ["buyer", "--scripted", "--overspend", "--url", "http://127.0.0.1:9", "--token", "bsr_agent_0123456789abcdefghij", "--operator-token", "bsr_op_SECRET0123456789abcdef\nX"], "--operator-token", "operator token"],
    ["agent", ["agent", "create", "--name", "b", "--url", "http://127.0.0.1:9", "--token", "bsr_op_SECRET0123456789abcdef\r\nX"], "--token", "operator token"],
  ])("bursar %s refuses a token holding a line break in one line, never printing it", async (command, args, name, what) => {
    const result = await runBursar(args, { BURSAR_DATA_DIR: dataDir(), BURSAR_ADMIN_TOKEN: "", BURSAR_AGENT_TOKEN: "" });
    // Was: cannot connect … (Headers.append: "Bearer bsr_agent_SECRET…") — fetch quoted the header, token and all.
    expect(result.stderr).toBe(`bursar ${command}: ${name} holds whitespace or a control character (a pasted line break?): set it to the ${what} alone\n`);
    expect(result.code).toBe(2);
    expect(result.stderr + result.stdout).not.toContain("SECRET");
  });

  // parseArgs keeps an option's last value: `--reserved 100 … --reserved 10000000` went through as the second.
  it.each([
    [["block", "create", "--agent", "agt_x", "--currency", "INR", "--reserved", "100", "--reserved", "10000000"], "option --reserved is given twice; give it once"],
    [["serve", "--port", "0", "--port", "8787"], "option --port is given twice; give it once"],
    [["export", "--out", "a.jsonl", "--out", "b.jsonl"], "option --out is given twice; give it once"],
    [["verify", "log.jsonl", "--key", "k1", "--key", "k2"], "option --key is given twice; give it once"],
    [["simulator", "--webhook-secret", "whsec_a", "--webhook-secret", "whsec_b"], "option --webhook-secret is given twice; give it once"],
    [["buyer", "--scripted", "--scripted"], "option --scripted is given twice; give it once"],
  ])("bursar %j refuses an option given twice, naming it, instead of keeping the last", async (args, message) => {
    const result = await runBursar(args, { BURSAR_DATA_DIR: dataDir(), BURSAR_URL: "http://127.0.0.1:1", BURSAR_ADMIN_TOKEN: "x".repeat(20) }, undefined, 20_000);
    expect({ code: result.code, line: result.stderr.split("\n")[0] }).toEqual({ code: 2, line: `bursar ${args[0]}: ${message}` });
  });

  it.each([
    // Space-separated, as joined (--reserved=-5): the option's range, not parseArgs' "argument is ambiguous".
    [["block", "create", "--agent", "agt_x", "--currency", "INR", "--reserved", "-5"], '--reserved "-5": expected a whole number from 100 to 1000000000000'],
    [["verify", "--inclusion", "proof.json", "--index", "99999999999999999999"], `--index: expected an entry's seq, a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`],
    [["verify", "log.jsonl", "--checkpoint", "", "--key", "k"], '--checkpoint "": expected the path of a checkpoint file (an empty path names none)'],
    // parseArgs' own message left a quote unclosed.
    [["migrate", "--out", "x"], "unknown option --out"],
    [["verify", "--bogus", "log.jsonl"], 'unknown option --bogus; an argument starting with "-" goes after "--" (as in -- --bogus)'],
  ])("bursar %j is refused in one line naming the option", async (args, message) => {
    const result = await runBursar(args, { BURSAR_DATA_DIR: dataDir(), BURSAR_URL: "http://127.0.0.1:1", BURSAR_ADMIN_TOKEN: "x".repeat(20) });
    expect({ code: result.code, line: result.stderr.split("\n")[0] }).toEqual({ code: 2, line: `bursar ${args[0]}: ${message}` });
  });

  it("bursar buyer takes an empty BURSAR_URL for its default, as every variable's empty value is", async () => {
    const result = await runBursar(["buyer", "--scripted"], { BURSAR_URL: "", BURSAR_AGENT_TOKEN: "bsr_agent_0123456789abcdefghijklmn", BURSAR_DATA_DIR: dataDir() }, undefined, 20_000);
    // Was: bursar buyer: --url "": expected an http(s) URL, exit 2.
    expect(result.stderr).not.toContain('--url ""');
    expect(result.stderr).toContain("http://127.0.0.1:8787");
  });

  it.each(["constructor", "toString", "__proto__"])("bursar block %s ID is not an action", async (action) => {
    const result = await runBursar(["block", action, "blk_x"], { BURSAR_URL: "http://127.0.0.1:1", BURSAR_ADMIN_TOKEN: "x".repeat(20) });
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe("bursar block: expected an action: create, show, revoke, unfreeze");
  });

  // The range each flag's field has on the server (block_field_ranges), named before anything is sent.
  it.each([
    ["--reserved", "10000000000000000", "100 to 1000000000000"],
    ["--reserved", "abc", "100 to 1000000000000"],
    ["--reserved", "50", "100 to 1000000000000"],
    ["--per-call-cap", "1000000001", "100 to 1000000000"],
    ["--approval-threshold", "1e3", "0 to 1000000000000"],
    ["--max-calls", "0", "1 to 1000000"],
  ])("bursar block create %s %j names the field's range and exits 2", async (flag, value, range) => {
    const result = await runBursar(["block", "create", "--agent", "agt_x", "--currency", "INR", flag, value], { BURSAR_URL: "http://127.0.0.1:1", BURSAR_ADMIN_TOKEN: "x".repeat(20) });
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar block: ${flag} ${JSON.stringify(value)}: expected a whole number from ${range}`);
  });

  it.each([
    ["2026-13-01T00:00:00Z", "names a date that does not exist (2026-13-01)"],
    ["2027-01-01", 'must be an RFC 3339 time with an offset, e.g. "2026-12-31T18:30:00Z" or "2027-01-01T00:00:00+05:30"'],
  ])("bursar block create --expires-at %j is refused before anything is sent, naming the option", async (value, problem) => {
    const result = await runBursar(["block", "create", "--agent", "agt_x", "--currency", "INR", "--expires-at", value], { BURSAR_URL: "http://127.0.0.1:1", BURSAR_ADMIN_TOKEN: "x".repeat(20) });
    expect({ code: result.code, line: result.stderr.split("\n")[0] }).toEqual({ code: 2, line: `bursar block: --expires-at ${JSON.stringify(value)}: ${problem}` });
  });

  it("bursar buyer against a gate that is down prints one line naming the URL and exits 1", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await runBursar(["buyer", "--scripted", "--url", url, "--token", "bsr_agt_x"], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^bursar buyer: cannot connect to the gate at ${url}/mcp \\(ECONNREFUSED\\); [^\\n]*\\n$`));
  });
});
