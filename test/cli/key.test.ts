// `bursar key` creating the data directory's signing key: never visible half-written, so a
// process racing the creator, or a start after a failed write, never reads an empty key.

import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config.js";
import { generateSigningKeyPem, resolveSigningKey, signing_key_file_name, type LoadedSigningKey } from "../../src/evidence/keys.js";
import { startServer } from "../../src/server/start.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

/** A writeFileSync cut in two: `create` opens (makes) the file, `fill` writes it and closes it. */
interface SplitWrite {
  path: string;
  create(): void;
  fill(): void;
}

/** When set, runs in place of the next writeFileSync of a path under `prefix` (then cleared). */
const interception: { prefix?: string; run?: (write: SplitWrite) => void } = {};

vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const writeFileSync: typeof real.writeFileSync = (file, data, options) => {
    const run = interception.run;
    if (!run || typeof file !== "string" || !interception.prefix || !file.startsWith(interception.prefix)) return real.writeFileSync(file, data, options);
    interception.run = undefined;
    const { flag = "w", mode } = (typeof options === "object" && options) || {};
    let fd: number | undefined;
    const close = () => {
      if (fd !== undefined) real.closeSync(fd);
      fd = undefined;
    };
    try {
      run({
        path: file,
        create: () => (fd = real.openSync(file, flag, mode)),
        fill: () => {
          real.writeFileSync(fd!, data);
          close();
        },
      });
    } finally {
      close();
    }
  };
  return { ...real, writeFileSync, default: { ...real, writeFileSync } };
});

const scratch = mkdtempSync(join(tmpdir(), "bursar-key-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
afterEach(() => {
  interception.run = undefined;
});

function freshDir(name: string): string {
  return join(scratch, name);
}

/** The key as PEM, to compare keys. */
function keyPem(loaded: LoadedSigningKey): string {
  return loaded.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
}

describe("signing key creation", () => {
  it("a process that looks while another is still writing the key never reads it empty: both end with one key", () => {
    const data_dir = freshDir("race");
    let racer: LoadedSigningKey | Error | undefined;
    interception.prefix = join(data_dir, signing_key_file_name);
    interception.run = (write) => {
      // The creator has made its file but not yet written the key: another process starts now.
      write.create();
      try {
        racer = resolveSigningKey({ dataDir: data_dir, create: true });
      } catch (error) {
        racer = error as Error;
      }
      write.fill();
    };
    // With an exclusive create of the key file itself, the racer read it empty: "is not a PEM private key".
    const creator = resolveSigningKey({ dataDir: data_dir, create: true });
    expect(racer).toBeDefined();
    expect(racer).not.toBeInstanceOf(Error);
    const winner = racer as LoadedSigningKey;
    expect(winner.created).toBe(true);
    expect(creator.created).toBe(false);
    expect(keyPem(creator)).toBe(keyPem(winner));
    expect(readdirSync(data_dir)).toEqual([signing_key_file_name]);
    expect(statSync(join(data_dir, signing_key_file_name)).mode & 0o777).toBe(0o600);
  });

  it("a write that fails part way (disk full, a crash) leaves no key file, so the next start generates one", () => {
    const data_dir = freshDir("enospc");
    interception.prefix = join(data_dir, signing_key_file_name);
    interception.run = (write) => {
      write.create(); // created, then nothing written
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", syscall: "write" });
    };
    expect(() => resolveSigningKey({ dataDir: data_dir, create: true })).toThrow(/ENOSPC/);
    // The exclusive create left an empty signing-key.pem that stopped every later start.
    const next = resolveSigningKey({ dataDir: data_dir, create: true });
    expect(next.created).toBe(true);
    expect(readFileSync(next.path, "utf8")).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
  });

  it("four `bursar key` processes on a fresh data directory print the same verifier key", async () => {
    ensureBuilt();
    const data_dir = freshDir("processes");
    const runs = await Promise.all(Array.from({ length: 4 }, () => runBursar(["key"], { BURSAR_DATA_DIR: data_dir, BURSAR_SIGNING_KEY: "" })));
    for (const run of runs) expect({ code: run.code, stderr: run.stderr.replace(/^bursar key: generated .*\n/, "") }).toEqual({ code: 0, stderr: "" });
    expect(new Set(runs.map((run) => run.stdout)).size).toBe(1);
    expect(runs.filter((run) => run.stderr.includes("generated a new signing key"))).toHaveLength(1);
  });
});

describe("bursar key on a data directory whose database holds a log", () => {
  it("prints the log's key, generates none when its file is missing, and refuses another key or origin, exit 2", async () => {
    ensureBuilt();
    const data_dir = freshDir("with-log");
    const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
    await started.app.close();
    const env = { BURSAR_DATA_DIR: data_dir, BURSAR_SIGNING_KEY: "", BURSAR_DB: "", BURSAR_LOG_ORIGIN: "" };
    const logs = await runBursar(["key"], env);
    expect(logs).toMatchObject({ code: 0, stderr: "" });
    const log_key = logs.stdout.trim();
    const db = join(data_dir, "bursar.db");

    const key_path = join(data_dir, signing_key_file_name);
    const kept = join(scratch, "kept-key.pem");
    renameSync(key_path, kept);
    const missing = await runBursar(["key"], env);
    // It generated a new key and printed it: every checkpoint then failed under it.
    expect(missing.stderr).toBe(`bursar key: signing key ${key_path}: cannot read it (ENOENT: no such file): restore the key the log in BURSAR_DB=${db} was started with (${log_key})\n`);
    expect({ code: missing.code, stdout: missing.stdout, exists: existsSync(key_path) }).toEqual({ code: 2, stdout: "", exists: false });

    const other = join(scratch, "other-key.pem");
    writeFileSync(other, generateSigningKeyPem(), { mode: 0o600 });
    const wrong = await runBursar(["key"], { ...env, BURSAR_SIGNING_KEY: other });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(new RegExp(`^bursar key: the signing key \\(bursar\\.local/log\\+\\S+\\) is not the log's: restore the key the log in BURSAR_DB=${db} was started with \\(`));

    expect(await runBursar(["key"], { ...env, BURSAR_SIGNING_KEY: kept })).toMatchObject({ code: 0, stdout: `${log_key}\n` });
    const origin = await runBursar(["key"], { ...env, BURSAR_SIGNING_KEY: kept, BURSAR_LOG_ORIGIN: "x.example/log" });
    expect(origin).toMatchObject({ code: 2, stderr: `bursar key: BURSAR_LOG_ORIGIN is "x.example/log", but the log in BURSAR_DB=${db} has the origin "bursar.local/log": set it back\n` });
  });
});

describe("bursar key while BURSAR_DB cannot be read", () => {
  it("generates no key (the log may hold another), exit 2; an existing key is printed with a note that it is unchecked", async () => {
    ensureBuilt();
    const data_dir = freshDir("unreadable-db");
    // A damaged SQLite file answers at once (an unreachable PostgreSQL is retried for seconds).
    const damaged = join(scratch, "damaged.db");
    writeFileSync(damaged, "not a database ".repeat(300));
    const env = { BURSAR_DATA_DIR: data_dir, BURSAR_SIGNING_KEY: "", BURSAR_DB: damaged, BURSAR_LOG_ORIGIN: "" };
    const refused = await runBursar(["key"], env);
    // It generated a key here and printed it, though the log it could not read may name another.
    expect(refused).toMatchObject({ code: 2, stdout: "" });
    expect(refused.stderr).toMatch(/^bursar key: BURSAR_DB=\S+damaged\.db: cannot read its log \(.+\), and signing key .*: cannot read it \(ENOENT: no such file\): no key is generated while the log it may already have cannot be read\n$/);
    expect(existsSync(join(data_dir, signing_key_file_name))).toBe(false);

    const made = await runBursar(["key"], { ...env, BURSAR_DB: join(data_dir, "fresh.db") });
    expect(made.code).toBe(0);
    const unchecked = await runBursar(["key"], env);
    expect(unchecked).toMatchObject({ code: 0, stdout: made.stdout });
    expect(unchecked.stderr).toMatch(/^bursar key: BURSAR_DB=\S+: cannot read its log \(.*\); the key below is not checked against it\n$/);
  });
});
