// Starting `bursar serve` when something is wrong: a failed first start keeps no hash of a token
// nobody saw, racing starts agree on one set of secrets, a corrupt hash or an unusable data
// directory, database or address stops the start with one line, files are private, and a
// signal during the start lets it end cleanly (no staged token file left behind).

import Database from "better-sqlite3";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { operator_token_hash_file, OperatorTokens } from "../../src/datadir.js";
import { same_signal_window_ms } from "../../src/server/app.js";
import { shutdownGraceMs, startServer } from "../../src/server/start.js";
import { bursar_bin, dist_index, builtSuiteDir } from "../support/build.js";
import { runBursar, startBursar } from "../support/process.js";
import { waitUntil, within } from "../support/wait.js";

async function occupiedPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : 0 };
}

/** A "PostgreSQL" that accepts connections and never answers: a start waits on it until `cut`. */
async function silentDatabase(): Promise<{ url: string; connected(): boolean; cut(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `postgres://bursar@127.0.0.1:${port}/bursar`,
    connected: () => sockets.size > 0,
    cut: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** `bursar serve` on a fresh data directory whose start hangs on `database`, with its output. */
function serveHangingOn(data_dir: string, database: string) {
  const child = spawn(process.execPath, [bursar_bin, "serve", "--port", "0"], {
    env: { ...process.env, BURSAR_DATA_DIR: data_dir, BURSAR_DB: database, BURSAR_ADMIN_TOKEN: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let errors = "";
  child.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()));
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, errors: () => errors, exited };
}

/** The operator token hash staged while a start runs (OperatorTokens.prepare), not yet stored or discarded. */
function stagedTokenFiles(data_dir: string): string[] {
  return readdirSync(data_dir).filter((name) => name.startsWith(`${operator_token_hash_file}.`) && name.endsWith(".tmp"));
}

describe("starting bursar serve", () => {
  const dir = builtSuiteDir("bursar-start-");

  it("a first start that cannot listen stores no token hash, and the next start prints a token", async () => {
    const data_dir = join(dir(), "inuse");
    const { server, port } = await occupiedPort();
    try {
      const failed = startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: String(port) }), { logger: false });
      await expect(failed).rejects.toThrow(ConfigError);
      await expect(failed).rejects.toThrow(/BURSAR_PORT=\d+: the address is already in use/);
    } finally {
      server.close();
    }
    expect(existsSync(join(data_dir, operator_token_hash_file))).toBe(false);
    expect(readdirSync(data_dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
    try {
      expect(started.generated_token).toMatch(/^bsr_op_/);
      expect(started.operator.check(started.generated_token)).toBe(true);
      expect(existsSync(join(data_dir, operator_token_hash_file))).toBe(true);
    } finally {
      await started.app.close();
    }
  });

  it("of two starts generating a token at once, only the one whose hash is stored shows it", () => {
    const data_dir = join(dir(), "token-race");
    const first = OperatorTokens.prepare(data_dir, undefined);
    const second = OperatorTokens.prepare(data_dir, undefined);
    const won = first.pending?.commit();
    const lost = second.pending?.commit();
    expect(won?.shown).toMatch(/^bsr_op_/);
    expect(lost?.shown).toBeUndefined();
    expect(lost?.tokens.check(won?.shown)).toBe(true);
    expect(readdirSync(data_dir)).toEqual([operator_token_hash_file]);
  });

  it("every start removes staged secrets a killed start left behind over a minute ago, and only those", async () => {
    const data_dir = join(dir(), "abandoned-staged");
    mkdirSync(data_dir, { recursive: true, mode: 0o700 });
    const gone = spawn(process.execPath, ["-e", ""]);
    const gone_pid = gone.pid!;
    await new Promise((resolve) => gone.once("exit", resolve));
    const abandoned = `master-key.${gone_pid}-0123456789ab.tmp`;
    // Too recent to tell from one another PID namespace is about to publish.
    const recent = `webhook-secret.${gone_pid}-0123456789ab.tmp`;
    const running = `signing-key.pem.${process.pid}-0123456789ab.tmp`;
    const unrelated = "notes.tmp";
    const old = new Date(Date.now() - 120_000);
    for (const name of [abandoned, recent, running, unrelated]) {
      writeFileSync(join(data_dir, name), "x\n", { mode: 0o600 });
      if (name !== recent) utimesSync(join(data_dir, name), old, old);
    }
    // A configured operator token: no token is generated, and the start still cleans up.
    const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: "abandoned-staged-operator-token-01" }), { logger: false });
    await started.app.close();
    const left = readdirSync(data_dir);
    expect(left).not.toContain(abandoned);
    expect(left).toEqual(expect.arrayContaining([recent, running, unrelated]));
  });

  it("two processes on a fresh data directory end up with one master key, webhook secret and token", async () => {
    const script = join(dir(), "race.mjs");
    writeFileSync(
      script,
      `const { OperatorTokens, secretFile, randomSecret } = await import(${JSON.stringify(join(dist_index, "../datadir.js"))});
const [dir, at] = [process.argv[2], Number(process.argv[3])];
while (Date.now() < at) {}
const master = secretFile(dir, "master-key", randomSecret).value;
const webhook = secretFile(dir, "webhook-secret", randomSecret).value;
const { pending } = OperatorTokens.prepare(dir, undefined);
console.log(JSON.stringify({ master, webhook, token: pending?.commit().shown ?? null }));`,
    );
    for (let round = 0; round < 3; round++) {
      const data_dir = join(dir(), `race-${round}`);
      const at = String(Date.now() + 700);
      const outputs = await Promise.all(
        [0, 1].map(
          () =>
            new Promise<string>((resolve) => {
              const child = spawn(process.execPath, [script, data_dir, at], { stdio: ["ignore", "pipe", "inherit"] });
              let output = "";
              child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
              child.on("exit", () => resolve(output));
            }),
        ),
      );
      const results = outputs.map((output) => JSON.parse(output) as { master: string; webhook: string; token: string | null });
      expect(results[0]?.master).toBe(readFileSync(join(data_dir, "master-key"), "utf8").trim());
      expect(results[1]?.master).toBe(results[0]?.master);
      expect(results[1]?.webhook).toBe(readFileSync(join(data_dir, "webhook-secret"), "utf8").trim());
      expect(results[0]?.webhook).toBe(results[1]?.webhook);
      const shown = results.map((result) => result.token).filter((token): token is string => token !== null);
      expect(shown).toHaveLength(1);
      expect(OperatorTokens.prepare(data_dir, undefined).tokens.check(shown[0])).toBe(true);
    }
  });

  it.each([
    ["empty", ""],
    ["not hex", "not a hash\n"],
    ["too short", "abcd\n"],
  ])("a %s operator token hash stops the start with one line naming the file and admin rotate", async (_label, contents) => {
    const data_dir = join(dir(), `hash-${_label.replace(/\s/g, "-")}`);
    mkdirSync(data_dir, { recursive: true });
    writeFileSync(join(data_dir, operator_token_hash_file), contents);
    await expect(startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false })).rejects.toThrow(
      /operator-token\.sha256 is not an operator token hash.*bursar admin rotate/,
    );
    const cli = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" });
    expect(cli.code).toBe(2);
    expect(cli.stderr.trim().split("\n")).toHaveLength(1);
    expect(cli.stderr).toContain("bursar admin rotate");
  });

  it.each(["webhook-secret", "master-key"])("an empty %s file stops the start with one line naming it", async (name) => {
    const data_dir = join(dir(), `empty-${name}`);
    mkdirSync(data_dir, { recursive: true });
    writeFileSync(join(data_dir, name), "\n");
    const cli = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" });
    expect(cli.code).toBe(2);
    expect(cli.stderr.trim().split("\n")).toEqual([expect.stringContaining(`${name} is empty`)]);
  });

  it("stops with one line when the master key does not open the evidence sources' stored signing keys, and keeps no key it made", async () => {
    const data_dir = join(dir(), "master-key-lost");
    const token = "master-key-test-operator-token-0123";
    const env = { BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: token };
    const first = await startServer(loadConfig(env), { logger: false });
    try {
      const created = await fetch(`${first.url}/api/v1/evidence-sources`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ kind: "decisions", name: "sealed" }),
      });
      expect(created.status).toBe(201);
    } finally {
      await first.app.close();
    }
    const master_key_path = join(data_dir, "master-key");
    const kept = readFileSync(master_key_path, "utf8");
    // Another BURSAR_MASTER_KEY.
    await expect(startServer(loadConfig({ ...env, BURSAR_MASTER_KEY: "another-master-key-0123456789abcdef" }), { logger: false })).rejects.toThrow(
      /master key from BURSAR_MASTER_KEY does not open the evidence sources' signing keys/,
    );
    // The file lost: the key this start generates is removed again, so the next start cannot take it up.
    rmSync(master_key_path);
    await expect(startServer(loadConfig(env), { logger: false })).rejects.toThrow(/master-key \(missing, so this start made a new one, now removed again\) does not open/);
    expect(existsSync(master_key_path)).toBe(false);
    const cli = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: token });
    expect(cli.code).toBe(2);
    expect(cli.stderr.trim().split("\n")).toEqual([expect.stringContaining("restore the master key they were sealed under")]);
    expect(existsSync(master_key_path)).toBe(false);
    // Restored: the start goes on.
    writeFileSync(master_key_path, kept, { mode: 0o600 });
    const restored = await startServer(loadConfig(env), { logger: false });
    await restored.app.close();
    // Lost for good: the recovery docs/evidence-sources.md gives (remove the sealed keys, start, rotate) works.
    const other_key = { ...env, BURSAR_MASTER_KEY: "another-master-key-0123456789abcdef" };
    const database = new Database(join(data_dir, "bursar.db"));
    database.prepare("DELETE FROM evidence_source_secrets WHERE purpose = 'signing_key'").run();
    database.close();
    const recovered = await startServer(loadConfig(other_key), { logger: false });
    try {
      const listed = await fetch(`${recovered.url}/api/v1/evidence-sources`, { headers: { authorization: `Bearer ${token}` } });
      const { sources } = (await listed.json()) as { sources: Array<{ id: string }> };
      const rotated = await fetch(`${recovered.url}/api/v1/evidence-sources/${sources[0]!.id}/rotate`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ grace_seconds: 0 }),
      });
      expect(rotated.status).toBe(200);
      expect(((await rotated.json()) as { signing_key: string }).signing_key).toMatch(/^bsr_whsec_/);
    } finally {
      await recovered.app.close();
    }
    // Sealed under the other key now: that key starts, the old one is refused.
    const again = await startServer(loadConfig(other_key), { logger: false });
    await again.app.close();
  });

  it("creates the database, its WAL and shared memory 0600, and narrows an existing database it owns", async () => {
    const data_dir = join(dir(), "modes");
    const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
    try {
      for (const name of ["bursar.db", "bursar.db-wal", "bursar.db-shm", "master-key", "webhook-secret", "signing-key.pem", operator_token_hash_file]) {
        expect([name, statSync(join(data_dir, name)).mode & 0o777]).toEqual([name, 0o600]);
      }
      expect(statSync(data_dir).mode & 0o777).toBe(0o700);
    } finally {
      await started.app.close();
    }
    chmodSync(join(data_dir, "bursar.db"), 0o644);
    const again = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
    await again.app.close();
    expect(statSync(join(data_dir, "bursar.db")).mode & 0o777).toBe(0o600);
  });

  it("prints a generated operator token on stderr only: stdout, which carries the JSON logs, never holds it", async () => {
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "banner"), BURSAR_LOG_LEVEL: "info" });
    await fetch(`${server.url}/healthz`);
    expect(await server.stop()).toBe(0);
    const token = /bsr_op_\S+/.exec(server.output())?.[0];
    expect(token).toBeDefined();
    expect(server.stdout()).toContain("listening on");
    expect(server.stdout()).toContain('"level"');
    expect(server.stdout()).not.toContain(token);
  });

  it("warns once about a data directory or secret file others can read, and leaves their modes alone", async () => {
    const data_dir = join(dir(), "exposed");
    mkdirSync(data_dir, { mode: 0o755 });
    chmodSync(data_dir, 0o755);
    writeFileSync(join(data_dir, "master-key"), "m".repeat(64), { mode: 0o644 });
    chmodSync(join(data_dir, "master-key"), 0o644);
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir });
    expect(await server.stop()).toBe(0);
    const warnings = server.output().split("\n").filter((line) => line.includes("group or others have access"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(join(data_dir, "master-key"));
    expect(statSync(data_dir).mode & 0o777).toBe(0o755);
    expect(statSync(join(data_dir, "master-key")).mode & 0o777).toBe(0o644);
  });

  it("warns about a data directory its group can write to, as about one others can read", async () => {
    const data_dir = join(dir(), "group-writable");
    mkdirSync(data_dir, { mode: 0o770 });
    chmodSync(data_dir, 0o770);
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir });
    expect(await server.stop()).toBe(0);
    const warnings = server.output().split("\n").filter((line) => line.includes("group or others have access"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(JSON.stringify(data_dir));
  });

  it.each([
    ["BURSAR_DB", (data_dir: string) => ({ BURSAR_DATA_DIR: data_dir, BURSAR_DB: join(data_dir, "missing", "x.db") })],
    ["BURSAR_DB", (data_dir: string) => ({ BURSAR_DATA_DIR: data_dir, BURSAR_DB: "postgres://bursar:hunter2-secret@127.0.0.1:1/bursar" })],
    ["BURSAR_DATA_DIR", (data_dir: string) => {
      writeFileSync(`${data_dir}-file`, "");
      return { BURSAR_DATA_DIR: join(`${data_dir}-file`, "inside") };
    }],
    // An address of TEST-NET-1 (RFC 5737), on no interface here: refused at once, with no DNS.
    ["BURSAR_HOST", (data_dir: string) => ({ BURSAR_DATA_DIR: data_dir, BURSAR_HOST: "192.0.2.1" })],
  ])("a start-up failure prints one line naming %s and exits 2", async (variable, environment) => {
    const data_dir = join(dir(), `fail-${Math.random().toString(36).slice(2)}`);
    const cli = await runBursar(["serve", "--port", "0"], { BURSAR_ADMIN_TOKEN: "", ...environment(data_dir) }, undefined, 30_000);
    expect(cli.code).toBe(2);
    const lines = cli.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(variable);
    expect(cli.stderr).not.toContain("hunter2-secret");
    expect(cli.stdout).not.toContain("bsr_op_");
  });

  it("a SQLite database another process holds the write lock of stops the start with one line naming BURSAR_DB, exit 2", async () => {
    const data_dir = join(dir(), "locked");
    expect((await runBursar(["migrate"], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "" })).code).toBe(0);
    // Another serve on the file, or one stopped (SIGSTOP) while it held the lock.
    const holder = new Database(join(data_dir, "bursar.db"));
    holder.exec("BEGIN IMMEDIATE");
    try {
      const refused = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "" });
      // It printed SqliteError's stack trace and exited 1.
      expect({ code: refused.code, lines: refused.stderr.trim().split("\n") }).toEqual({
        code: 2,
        lines: [expect.stringMatching(/^bursar serve: BURSAR_DB=\S+bursar\.db: the SQLite database is locked by another process \(.*database is locked\); nothing was changed/)],
      });
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("a port in use stops the CLI with one line naming BURSAR_PORT, exit 2", async () => {
    const { server, port } = await occupiedPort();
    try {
      const cli = await runBursar(["serve"], { BURSAR_DATA_DIR: join(dir(), "cli-inuse"), BURSAR_PORT: String(port), BURSAR_ADMIN_TOKEN: "" });
      expect(cli.code).toBe(2);
      expect(cli.stderr.trim().split("\n")).toEqual([expect.stringMatching(/BURSAR_PORT=\d+: the address is already in use/)]);
      // A port given as --port is named so, whatever BURSAR_PORT says.
      const option = await runBursar(["serve", "--port", String(port)], { BURSAR_DATA_DIR: join(dir(), "cli-inuse-option"), BURSAR_PORT: "9999", BURSAR_ADMIN_TOKEN: "" });
      expect(option.code).toBe(2);
      expect(option.stderr).toBe(`bursar serve: BURSAR_HOST=127.0.0.1 --port ${port}: the address is already in use (another bursar serve?)\n`);
    } finally {
      server.close();
    }
  });

  it("the shutdown grace period outlasts a money call's provider requests", async () => {
    expect(shutdownGraceMs(120_000)).toBeGreaterThan(3 * 120_000);
    expect(shutdownGraceMs(10_000)).toBeGreaterThan(10_000);
    const server = await startBursar(["serve", "--port", "0"], {
      BURSAR_DATA_DIR: join(dir(), "grace"),
      BURSAR_PROVIDER_TIMEOUT_MS: "120000",
      BURSAR_LOG_LEVEL: "info",
    });
    expect(await server.stop()).toBe(0);
    const line = server.output().split("\n").find((text) => text.includes("shutting down"));
    expect(JSON.parse(line as string)).toMatchObject({ grace_ms: shutdownGraceMs(120_000) });
  });

  it("a signal during the start lets it end first: a start that then fails leaves no token file, exit 2, not a silent death", async () => {
    const database = await silentDatabase();
    const data_dir = join(dir(), "signal-mid-start");
    const serve = serveHangingOn(data_dir, database.url);
    try {
      await waitUntil("the start to wait on the database", () => database.connected());
      // The new token's hash is written only once the token can be shown: nothing is staged meanwhile.
      expect(stagedTokenFiles(data_dir)).toEqual([]);
      // Before, SIGTERM here killed the process at once (Node's default).
      serve.child.kill("SIGTERM");
      await waitUntil("the signal to be acknowledged", () => serve.errors().includes("bursar serve: SIGTERM while starting: stopping once started"));
    } finally {
      database.cut();
    }
    expect(await within("the process to exit", serve.exited)).toBe(2);
    expect(serve.errors()).toContain("BURSAR_DB=");
    expect(stagedTokenFiles(data_dir)).toEqual([]);
    expect(existsSync(join(data_dir, operator_token_hash_file))).toBe(false);
  });

  it("a second signal during the start exits at once, 128 + its number, saying so", async () => {
    const database = await silentDatabase();
    const serve = serveHangingOn(join(dir(), "second-signal-mid-start"), database.url);
    try {
      await waitUntil("the start to wait on the database", () => database.connected());
      serve.child.kill("SIGINT");
      await waitUntil("the signal to be acknowledged", () => serve.errors().includes("SIGINT while starting"));
      // Past the window within which the same signal again is taken for the first, delivered twice.
      await new Promise((resolve) => setTimeout(resolve, same_signal_window_ms + 20));
      serve.child.kill("SIGINT");
      expect(await within("the process to exit", serve.exited, 10_000)).toBe(130);
      expect(serve.errors()).toContain("bursar serve: second signal (SIGINT) while starting, exiting now");
    } finally {
      database.cut();
    }
  });
});
