// `bursar export` refuses an --out or --checkpoint that exists and is not a regular file
// (/dev/null, a FIFO, /dev/stdout, a directory): /dev/null crashed with an ftruncate EINVAL
// stack, and a FIFO no one reads hung the run. One line naming the option and the path, exit 2,
// before anything is opened or written.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { builtSuiteDir, servedDataDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-export-not-file-");
let env: Record<string, string> = {};

beforeAll(async () => {
  // A first start makes a database holding a log with a signed checkpoint: export gets as far as writing.
  const data_dir = await servedDataDir(dir());
  execFileSync("mkfifo", [join(dir(), "fifo")]);
  mkdirSync(join(dir(), "a-directory"));
  env = { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "", BURSAR_SIGNING_KEY: "", BURSAR_LOG_ORIGIN: "" };
});

const refusal = (option: string, path: string, kind: string) =>
  `bursar export: ${option} ${path}: ${kind}, not a regular file; export writes a regular file (a new one, or one it overwrites): choose a file path\n`;

describe("bursar export to a path that is not a regular file", () => {
  // [option, what, path, what export calls it]
  const cases: Array<[string, string, () => string, string]> = [
    ["--out", "/dev/null", () => "/dev/null", "a character device"],
    ["--out", "a FIFO", () => join(dir(), "fifo"), "a named pipe (FIFO)"],
    // The test's pipe to the process: node makes it a socket pair.
    ["--out", "/dev/stdout", () => "/dev/stdout", "a socket"],
    ["--out", "a directory", () => join(dir(), "a-directory"), "a directory"],
    ["--checkpoint", "/dev/null", () => "/dev/null", "a character device"],
    ["--checkpoint", "a FIFO", () => join(dir(), "fifo"), "a named pipe (FIFO)"],
  ];
  it.each(cases)("refuses %s %s in one line naming it, exit 2, writing nothing", async (option, _, path, kind) => {
    const unused = join(dir(), "unused.jsonl");
    const args = option === "--out" ? ["--out", path()] : ["--out", unused, "--checkpoint", path()];
    // Killed after a while: a FIFO no one reads held the run open for ever.
    const result = await runBursar(["export", ...args], env, undefined, 45_000);
    expect(result.stderr).toBe(refusal(option, path(), kind));
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(existsSync(unused)).toBe(false);
  });

  it("still exports to a regular file", async () => {
    const result = await runBursar(["export", "--out", join(dir(), "log.jsonl"), "--checkpoint", join(dir(), "cp.txt")], env, undefined, 60_000);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^exported \d+ entries and \d+ checkpoints to /);
  });
});
