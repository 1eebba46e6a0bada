// `bursar export` never writes over a file Bursar owns: --out and --checkpoint naming the
// database, its journals or a data-directory secret (directly, through `..`, a symlinked
// directory or a hard link) are refused in one line with exit 2, and the file is unchanged.

import { createHash } from "node:crypto";
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { startServer } from "../../src/server/start.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

const owned_names = ["bursar.db", "signing-key.pem", "master-key", "webhook-secret", "operator-token.sha256"];

let scratch = "";
let data_dir = "";
let env: Record<string, string> = {};

function digests(): Record<string, string> {
  return Object.fromEntries(owned_names.map((name) => [name, createHash("sha256").update(readFileSync(join(data_dir, name))).digest("hex")]));
}

function bursarExport(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runBursar(["export", ...args], env);
}

beforeAll(async () => {
  ensureBuilt();
  scratch = mkdtempSync(join(tmpdir(), "bursar-export-targets-"));
  data_dir = join(scratch, "data");
  // A first start makes every file the data directory holds: database, key, secrets, token hash.
  const started = await startServer(loadConfig({ BURSAR_DATA_DIR: data_dir, BURSAR_PORT: "0" }), { logger: false });
  await started.app.close();
  symlinkSync(data_dir, join(scratch, "data-link"));
  linkSync(join(data_dir, "signing-key.pem"), join(scratch, "hard-link-to-key"));
  symlinkSync(join(data_dir, "bursar.db-journal"), join(scratch, "link-to-missing-journal"));
  // hop/.. is elsewhere (the kernel follows the link first), not scratch as the text reads.
  mkdirSync(join(scratch, "elsewhere", "inner"), { recursive: true });
  symlinkSync(join(scratch, "elsewhere", "inner"), join(scratch, "hop"));
  env = { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "", BURSAR_SIGNING_KEY: "", BURSAR_LOG_ORIGIN: "" };
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("bursar export output targets", () => {
  it("has a data directory holding every owned file", () => {
    for (const name of owned_names) expect(existsSync(join(data_dir, name))).toBe(true);
  });

  // [what, option, target, the owned file it lands on]
  const refused: Array<[string, "--out" | "--checkpoint", () => string, string]> = [
    ["--out naming the database", "--out", () => join(data_dir, "bursar.db"), "bursar.db"],
    ["--out naming the database's WAL", "--out", () => join(data_dir, "bursar.db-wal"), "bursar.db-wal"],
    ["--out naming the shared-memory file through ..", "--out", () => `${data_dir}/../${basename(data_dir)}/bursar.db-shm`, "bursar.db-shm"],
    ["--out naming the master key through a symlinked directory", "--out", () => join(scratch, "data-link", "master-key"), "master-key"],
    ["--out naming the database through a symlink and ..", "--out", () => `${scratch}/hop/../../${basename(data_dir)}/bursar.db`, "bursar.db"],
    ["--out naming the webhook secret", "--out", () => join(data_dir, "webhook-secret"), "webhook-secret"],
    ["--out naming the operator token hash", "--out", () => join(data_dir, "operator-token.sha256"), "operator-token.sha256"],
    ["--out naming a hard link to the signing key", "--out", () => join(scratch, "hard-link-to-key"), "signing-key.pem"],
    ["--out naming a symlink to the missing rollback journal", "--out", () => join(scratch, "link-to-missing-journal"), "bursar.db-journal"],
    ["--checkpoint naming the signing key", "--checkpoint", () => join(data_dir, "signing-key.pem"), "signing-key.pem"],
  ];
  it.each(refused)("refuses %s in one line, exit 2, leaving every owned file as it was", async (_, option, target, owned) => {
    const before = digests();
    const args = option === "--out" ? ["--out", target()] : ["--out", join(scratch, "unused.jsonl"), "--checkpoint", target()];
    const result = await bursarExport(args);
    // `--out $BURSAR_DATA_DIR/bursar.db` truncated the database and exited 0.
    expect(result.stderr).toBe(`bursar export: ${option} ${target()}: refusing to overwrite ${join(data_dir, owned)}, a file Bursar owns; choose another path\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(digests()).toEqual(before);
    if (owned.startsWith("bursar.db-")) expect(existsSync(join(data_dir, owned))).toBe(false);
    // Refused before anything is written: not even the --out of a refused --checkpoint.
    if (option === "--checkpoint") expect(existsSync(join(scratch, "unused.jsonl"))).toBe(false);
  });

  it("refuses --checkpoint naming the --out file", async () => {
    const result = await bursarExport(["--out", join(scratch, "same.jsonl"), "--checkpoint", `${scratch}/./same.jsonl`]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`bursar export: --checkpoint ${scratch}/./same.jsonl: the same file as --out; choose another path\n`);
  });

  it("reports an --out it cannot open in one line with exit 2, leaving no --checkpoint file it made", async () => {
    const out = join(scratch, "no-such-directory", "log.jsonl");
    const result = await bursarExport(["--out", out, "--checkpoint", join(scratch, "left.txt")]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(new RegExp(`^bursar export: --out ${out}: cannot use it \\(ENOENT[^\\n]*\\n$`));
    expect(existsSync(join(scratch, "left.txt"))).toBe(false);
  });

  it("still writes an export and its checkpoint to new files inside the data directory, private (0600) as the database", async () => {
    const result = await bursarExport(["--out", join(data_dir, "log.jsonl"), "--checkpoint", join(data_dir, "cp.txt")]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(readFileSync(join(data_dir, "log.jsonl"), "utf8").split("\n")[0]).toContain("bursar");
    expect(readFileSync(join(data_dir, "cp.txt"), "utf8")).toMatch(/^bursar\.local\/log\n\d+\n/);
    for (const name of ["log.jsonl", "cp.txt"]) expect(statSync(join(data_dir, name)).mode & 0o777, name).toBe(0o600);
  });

  it("leaves an earlier --out as it was when --checkpoint cannot be opened", async () => {
    const out = join(scratch, "earlier.jsonl");
    writeFileSync(out, "an earlier export\n");
    const checkpoint = join(scratch, "no-such-directory", "cp.txt");
    const result = await bursarExport(["--out", out, "--checkpoint", checkpoint]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^bursar export: --checkpoint .*cp\.txt: cannot use it \(ENOENT/);
    expect(readFileSync(out, "utf8")).toBe("an earlier export\n");
  });

  it("refuses a database that holds no evidence log, and creates nothing in it", async () => {
    const empty = join(scratch, "empty.db");
    writeFileSync(empty, "");
    const result = await runBursar(["export", "--out", join(scratch, "from-empty.jsonl")], { ...env, BURSAR_DB: empty });
    expect(result.stderr).toBe(`bursar export: BURSAR_DB=${empty} holds no evidence log: start 'bursar serve' on it first\n`);
    expect(result.code).toBe(2);
    // Not even opened for writing (which set WAL mode and made it a 4096-byte database).
    expect(statSync(empty).size).toBe(0);
    expect(existsSync(join(scratch, "from-empty.jsonl"))).toBe(false);
  });
});
