// Directories Bursar makes where the user points it (BURSAR_DATA_DIR, eval's and mutate's --out):
// made one level at a time, so a parent that refuses children (/proc) fails at once with one
// line, where Node's recursive mkdir spun forever, deaf even to SIGTERM; and a report directory
// is checked before a long run, not after it.

import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeDirectories } from "../../src/datadir.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-make-directories-");

function expectOneLine(result: { code: number | null; stdout: string; stderr: string }, line: RegExp): void {
  expect(result.stderr).not.toMatch(/\n\s+at /);
  expect(result.stderr).toMatch(line);
  expect(result.code).toBe(2);
}

describe("makeDirectories", () => {
  it("makes the missing parents too, each with the mode given, and leaves an existing directory as it is", () => {
    const path = join(dir(), "a", "b", "c");
    makeDirectories(path, 0o700);
    for (const made of [join(dir(), "a"), join(dir(), "a", "b"), path]) expect(statSync(made).mode & 0o777).toBe(0o700);
    makeDirectories(path, 0o700);
    expect(statSync(path).isDirectory()).toBe(true);
  });

  it("fails with mkdir's own error on a path that is a file, or under one", () => {
    const file = join(dir(), "a-file");
    writeFileSync(file, "");
    expect(() => makeDirectories(file)).toThrow(/EEXIST/);
    expect(() => makeDirectories(join(file, "below"))).toThrow(/ENOTDIR/);
  });

  it.runIf(process.platform === "linux")("fails at once under a parent that refuses children with ENOENT (/proc)", () => {
    expect(() => makeDirectories("/proc/bursar-no-such/data", 0o700)).toThrow(/ENOENT/);
  });
});

describe("where the CLI makes directories", () => {
  it.runIf(process.platform === "linux")("bursar serve with BURSAR_DATA_DIR under /proc: one line naming it, exit 2 (it spun forever)", async () => {
    const result = await runBursar(["serve"], { BURSAR_DATA_DIR: "/proc/bursar-no-such", BURSAR_DB: "", BURSAR_ADMIN_TOKEN: "", BURSAR_PORT: "0" }, undefined, 20_000);
    expectOneLine(result, /^bursar serve: BURSAR_DATA_DIR=\/proc\/bursar-no-such: cannot use it \(ENOENT/);
  });

  it("bursar eval --out a regular file: refused before any case runs, one line, exit 2", async () => {
    const file = join(dir(), "eval-out-file");
    writeFileSync(file, "");
    const result = await runBursar(["eval", "--out", file]);
    expectOneLine(result, new RegExp(`^bursar eval: --out ${file}: cannot use it \\(EEXIST`));
    expect(result.stderr).not.toMatch(/eval cases/);
  });

  it("bursar mutate --out under a regular file: refused before any mutant runs, one line, exit 2", async () => {
    const file = join(dir(), "mutate-out-file");
    writeFileSync(file, "");
    const result = await runBursar(["mutate", "--out", join(file, "reports")]);
    expectOneLine(result, new RegExp(`^bursar mutate: --out ${join(file, "reports")}: cannot use it \\(ENOTDIR`));
    expect(result.stderr).not.toMatch(/mutants/);
  });

  it("bursar eval or mutate --cases naming no directory it can read: one line naming --cases, exit 2", async () => {
    const file = join(dir(), "cases-file");
    writeFileSync(file, "");
    for (const [command, cases, code] of [["eval", join(dir(), "no-such-cases"), "ENOENT"], ["mutate", file, "ENOTDIR"]] as const) {
      const result = await runBursar([command, "--cases", cases, "--out", join(dir(), "never-written")]);
      // It said "bursar eval: ENOENT: no such file or directory, scandir '…'".
      expectOneLine(result, new RegExp(`^bursar ${command}: --cases ${cases}: cannot use it \\(${code}`));
    }
    expect(() => statSync(join(dir(), "never-written"))).toThrow(/ENOENT/);
  });

  it("bursar eval --cases with no cases in it: refused, exit 2 (it scored nothing and passed)", async () => {
    const empty = join(dir(), "no-cases");
    mkdirSync(empty);
    const result = await runBursar(["eval", "--cases", empty, "--out", join(dir(), "never-written")]);
    expectOneLine(result, new RegExp(`^bursar eval: ${empty} holds no cases`));
    expect(() => statSync(join(dir(), "never-written"))).toThrow(/ENOENT/);
  });
});
