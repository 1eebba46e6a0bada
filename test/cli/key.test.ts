// `bursar key` creating the data directory's signing key: never visible half-written, so a
// process racing the creator, or a start after a failed write, never reads an empty key.

import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { resolveSigningKey, signing_key_file_name, type LoadedSigningKey } from "../../src/evidence/keys.js";
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
