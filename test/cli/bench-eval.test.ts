// `bursar bench` runs the built benchmarks by name; `bursar eval` works from the published
// package (its cases are in "files") and writes its reports under the current directory.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { bench_names } from "../../src/cli/commands/bench.js";
import { bursar_bin, ensureBuilt, repo_root } from "../support/build.js";
import { runBursar } from "../support/process.js";

beforeAll(() => ensureBuilt());

describe("bursar bench", () => {
  it("alone lists every benchmark, each built under dist/bench", async () => {
    const result = await runBursar(["bench"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`benchmarks: ${bench_names.join(", ")} (run: bursar bench NAME)\n`);
    for (const name of bench_names) expect(existsSync(join(repo_root, "dist", "bench", `${name}.js`)), name).toBe(true);
  });

  it.each(["nope", "constructor", "support"])("refuses %j listing the valid names (exit 2)", async (name) => {
    const result = await runBursar(["bench", name]);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar bench: unknown benchmark ${JSON.stringify(name)}; benchmarks: ${bench_names.join(", ")} (run: bursar bench NAME)`);
  });

  it("runs the benchmark in a child with this environment and returns its exit code", async () => {
    // bench:pg against a closed port refuses at once: its line and exit code come through.
    const result = await runBursar(["bench", "pg"], { BURSAR_BENCH_PG: "postgres://nobody@127.0.0.1:1/none" });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("bench:pg: BURSAR_BENCH_PG=postgres://nobody@127.0.0.1:1/none: cannot reach PostgreSQL (connect ECONNREFUSED 127.0.0.1:1)\n");
    expect(result.stdout).toBe("");
  }, 30_000);
});

describe("bursar eval from the package", () => {
  it("ships eval/cases and dist (with dist/bench) in package.json files", () => {
    const files = (JSON.parse(readFileSync(join(repo_root, "package.json"), "utf8")) as { files: string[] }).files;
    expect(files).toContain("eval/cases");
    expect(files).toContain("dist");
  });

  it("writes report.md and report.json to ./eval under the current directory by default", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "bursar-eval-"));
    try {
      const child = spawn(process.execPath, [bursar_bin, "eval"], { cwd, env: { ...process.env, CI: "true" }, stdio: ["ignore", "pipe", "pipe"], timeout: 55_000, killSignal: "SIGKILL" });
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code, stdout).toBe(0);
      expect(readFileSync(join(cwd, "eval", "report.md"), "utf8")).toBe(readFileSync(join(repo_root, "eval", "report.md"), "utf8"));
      expect(existsSync(join(cwd, "eval", "report.json"))).toBe(true);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 60_000);
});
