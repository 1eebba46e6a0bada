// What the start trusts on disk: a data directory others can write into or another user owns,
// a secret in it that is a symbolic link, and a key file that is not a regular file (a FIFO
// would hang the start), or one others can write to, each stop the start with one line naming the path and the fix, exit 2.
// BURSAR_SIGNING_KEY's errors name the variable. Tests run as root too, so ownership by root counts as trusted.

import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { operator_token_hash_file } from "../../src/datadir.js";
import { generateSigningKeyPem, resolveSigningKey, signing_key_file_name } from "../../src/evidence/keys.js";
import { startServer } from "../../src/server/start.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar, startBursar } from "../support/process.js";

/** Long enough for a start that refuses; a start that hangs on a FIFO is killed then (code null). */
const refusal_timeout_ms = 15_000;

function mkfifo(path: string): void {
  execFileSync("mkfifo", [path]);
}

/** `bursar serve` in a child process: a hang fails the test instead of blocking it. */
async function serve(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runBursar(["serve", "--port", "0"], { BURSAR_ADMIN_TOKEN: "", BURSAR_SIGNING_KEY: "", BURSAR_MASTER_KEY: "", ...env }, undefined, refusal_timeout_ms);
}

function expectOneLine(result: { code: number | null; stdout: string; stderr: string }, pattern: RegExp): void {
  expect(result.code).toBe(2);
  expect(result.stderr.trim().split("\n")).toEqual([expect.stringMatching(pattern)]);
  expect(result.stdout).not.toContain("listening");
}

const root = process.geteuid?.() === 0;

describe("the data directory", () => {
  const dir = builtSuiteDir("bursar-trusted-");

  it("one writable by others (even with the sticky bit) is refused before any secret is read or created", async () => {
    for (const mode of [0o777, 0o1777, 0o703]) {
      const data_dir = join(dir(), `writable-${mode.toString(8)}`);
      mkdirSync(data_dir);
      chmodSync(data_dir, mode);
      await expect(startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false })).rejects.toThrow(
        new ConfigError(`BURSAR_DATA_DIR=${data_dir}: writable by others (mode ${mode.toString(8).padStart(4, "0")}), so they could replace its secrets; run chmod 700 ${data_dir}`),
      );
      expect(readdirSync(data_dir)).toEqual([]);
    }
    const data_dir = join(dir(), "writable-777");
    expectOneLine(await serve({ BURSAR_DATA_DIR: data_dir }), /^bursar serve: BURSAR_DATA_DIR=.*writable-777: writable by others .*run chmod 700 /);
  });

  it.skipIf(!root)("one owned by another user is refused, naming the owner and the fix", async () => {
    const data_dir = join(dir(), "foreign");
    mkdirSync(data_dir, { mode: 0o700 });
    chownSync(data_dir, 4321, 4321);
    expectOneLine(await serve({ BURSAR_DATA_DIR: data_dir }), /^bursar serve: BURSAR_DATA_DIR=.*foreign: owned by another user \(uid 4321; this process runs as uid 0\).*run chown 0 /);
    expect(readdirSync(data_dir)).toEqual([]);
  });

  it("the default flow is unchanged: a fresh private directory under a sticky, world-writable parent starts", async () => {
    // Like /tmp: only the data directory itself and its secrets matter, not its parents.
    const parent = join(dir(), "sticky");
    mkdirSync(parent);
    chmodSync(parent, 0o1777);
    const config = loadConfig({ BURSAR_DATA_DIR: join(parent, "data"), BURSAR_PORT: "0" });
    for (let start = 0; start < 2; start++) {
      const started = await startServer(config, { logger: false });
      await started.app.close();
      expect(started.operator.configured).toBe(true);
    }
  });

  it.each(["master-key", "webhook-secret", operator_token_hash_file, signing_key_file_name])("a %s that is a symbolic link is refused, naming it", async (name) => {
    const data_dir = join(dir(), `link-${name}`);
    mkdirSync(data_dir, { mode: 0o700 });
    const target = join(dir(), `target-${name}`);
    writeFileSync(target, name === signing_key_file_name ? generateSigningKeyPem() : name === operator_token_hash_file ? `${"a".repeat(64)}\n` : "s".repeat(64), { mode: 0o600 });
    symlinkSync(target, join(data_dir, name));
    expectOneLine(await serve({ BURSAR_DATA_DIR: data_dir }), new RegExp(`^bursar serve: ${data_dir}/${name}: a symbolic link; .*replace the link with a copy of the file`));
  });

  it("a secret in it that is a FIFO is refused instead of hanging the start", async () => {
    const data_dir = join(dir(), "fifo-secret");
    mkdirSync(data_dir, { mode: 0o700 });
    mkfifo(join(data_dir, "master-key"));
    expectOneLine(await serve({ BURSAR_DATA_DIR: data_dir }), /master-key: expected a regular file, found a FIFO$/);
  });

  it("a secret in it writable by others is refused", async () => {
    const data_dir = join(dir(), "writable-secret");
    mkdirSync(data_dir, { mode: 0o700 });
    writeFileSync(join(data_dir, "webhook-secret"), "w".repeat(64));
    chmodSync(join(data_dir, "webhook-secret"), 0o666);
    expectOneLine(await serve({ BURSAR_DATA_DIR: data_dir }), /webhook-secret: writable by others \(mode 0666\).*run chmod 600 /);
  });
});

describe("BURSAR_SIGNING_KEY", () => {
  const dir = builtSuiteDir("bursar-signing-key-");

  it("a FIFO is refused, naming the variable, instead of hanging the start", async () => {
    const fifo = join(dir(), "key.pem");
    mkfifo(fifo);
    expectOneLine(await serve({ BURSAR_DATA_DIR: join(dir(), "data-fifo"), BURSAR_SIGNING_KEY: fifo }), new RegExp(`^bursar serve: BURSAR_SIGNING_KEY=${fifo}: expected a regular file, found a FIFO$`));
    // A directory is no key file either.
    expect(() => resolveSigningKey({ explicitPath: dir(), dataDir: join(dir(), "unused"), create: true })).toThrow(
      `BURSAR_SIGNING_KEY=${dir()}: expected a regular file, found a directory`,
    );
  });

  it.each([
    ["missing", (path: string) => path, /: cannot read it \(ENOENT/],
    ["not PEM", (path: string) => (writeFileSync(path, "not a key\n"), path), /: not a PEM private key$/],
  ])("a %s key file is one line naming BURSAR_SIGNING_KEY", async (label, make, problem) => {
    const path = make(join(dir(), `key-${label.replace(/\s/g, "-")}.pem`));
    const data_dir = join(dir(), `data-${label.replace(/\s/g, "-")}`);
    await expect(startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_SIGNING_KEY: path, BURSAR_PORT: "0" }), { logger: false })).rejects.toThrow(
      new RegExp(`^BURSAR_SIGNING_KEY=${path}${problem.source}`),
    );
    const cli = await serve({ BURSAR_DATA_DIR: data_dir, BURSAR_SIGNING_KEY: path });
    expectOneLine(cli, new RegExp(`^bursar serve: BURSAR_SIGNING_KEY=${path}${problem.source}`));
    // Nothing made: no token hash, and no master key or webhook secret either.
    expect(readdirSync(data_dir)).toEqual([]);
  });

  it("a key file writable by others is refused, as the data directory's own would be; one group or others can read gets a warning", async () => {
    const path = join(dir(), "shared-key.pem");
    writeFileSync(path, generateSigningKeyPem());
    chmodSync(path, 0o666);
    expectOneLine(await serve({ BURSAR_DATA_DIR: join(dir(), "data-shared-key"), BURSAR_SIGNING_KEY: path }), new RegExp(`^bursar serve: BURSAR_SIGNING_KEY=${path}: writable by others \\(mode 0666\\).*run chmod 600 ${path}$`));
    chmodSync(path, 0o644);
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "data-readable-key"), BURSAR_SIGNING_KEY: path, BURSAR_ADMIN_TOKEN: "" });
    expect(await server.stop()).toBe(0);
    const warnings = server.output().split("\n").filter((line) => line.includes("group or others have access"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(path);
  });

  it("a key a start generated because the data directory's was missing, which the log refuses, is removed again", async () => {
    const data_dir = join(dir(), "data-lost-key");
    const first = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
    await first.app.close();
    const key = join(data_dir, signing_key_file_name);
    rmSync(key);
    await expect(startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false })).rejects.toThrow(
      new RegExp(`^${key} was missing, so this start made a new key, now removed again; the signing key \\(.*\\) is not the key this log was started with`),
    );
    // Left there, the next start would have taken it for the log's key and said the same, and bursar key printed it.
    expect(existsSync(key)).toBe(false);
  });

  it("a symbolic link chosen by the user is followed (a mounted secret), unlike one inside the data directory", () => {
    const target = join(dir(), "real-key.pem");
    writeFileSync(target, generateSigningKeyPem(), { mode: 0o600 });
    symlinkSync(target, join(dir(), "linked-key.pem"));
    expect(resolveSigningKey({ explicitPath: join(dir(), "linked-key.pem"), dataDir: join(dir(), "unused-2"), create: true }).privateKey.type).toBe("private");
  });
});
