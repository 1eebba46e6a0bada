// Every BENCH_* variable a benchmark reads is in the README's table of knobs, which
// `bursar bench --help` points to: none of them was documented anywhere. Each is parsed by
// the one helper in bench/support.ts, which refuses a bad value before any work: one line
// naming the variable, its value and its limits, exit 2. `BENCH_SECONDS=abc` ran and printed
// "0/s NaN", an empty value meant 0, a misspelt BENCH_SERVERS meant worker, and BENCH_SLICES=0
// or BENCH_VELOCITY_FLOOD=-5 were a thrown Error with a stack. These tests run only refusals:
// each ends before a benchmark would start measuring.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { postgresServerUrl } from "../support/backends.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

const root = join(import.meta.dirname, "..", "..");
const bench_files = readdirSync(join(root, "bench")).filter((name) => name.endsWith(".ts"));
const source = (file: string) => readFileSync(join(root, "bench", file), "utf8");

describe("benchmark knobs", () => {
  it("are each documented in the README's Benchmarks section, with their limits", () => {
    const read = new Set<string>();
    for (const file of bench_files) {
      for (const match of source(file).matchAll(/(?:process\.env\.|Knob\("bench:\w+", ")(BENCH_[A-Z_]+)/g)) read.add(match[1]!);
    }
    // Passed from bench:pg to its own child processes, not set by a user.
    read.delete("BENCH_SIGNING_KEY");
    expect(read.size).toBeGreaterThan(10);
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Benchmarks"), readme.indexOf("## Tests"));
    const undocumented = [...read].filter((name) => !section.includes(`| \`${name}\` |`));
    expect(undocumented).toEqual([]);
    // Variable, benchmarks, default, limits, what it sets: each cell filled.
    for (const name of read) {
      const row = section.split("\n").find((line) => line.startsWith(`| \`${name}\` |`))!;
      expect(row.split("|").slice(1, -1).map((cell) => cell.trim()).filter((cell) => cell !== "")).toHaveLength(5);
    }
  });

  it("are read only through the shared helper: no bench parses a BENCH_* variable itself", () => {
    const direct = bench_files.filter((file) => /process\.env\.BENCH_(?!SIGNING_KEY)/.test(source(file)) || /process\.env\[/.test(source(file)));
    expect(direct).toEqual(["support.ts"]);
  });
});

describe("bursar bench with a bad knob", () => {
  beforeAll(() => ensureBuilt());

  const cases = [
    { bench: "evidence", variable: "BENCH_SECONDS", value: "abc", limits: "a number above 0, at most 60" },
    { bench: "evidence", variable: "BENCH_SECONDS", value: "", limits: "a number above 0, at most 60" },
    { bench: "ledger", variable: "BENCH_SECONDS", value: "0", limits: "a number above 0, at most 60" },
    { bench: "gate", variable: "BENCH_SECONDS", value: "21", limits: "a number above 0, at most 20" },
    { bench: "gate", variable: "BENCH_SLICES", value: "0", limits: "a whole number from 1 to 10" },
    { bench: "gate", variable: "BENCH_SLICES", value: "2.5", limits: "a whole number from 1 to 10" },
    { bench: "gate", variable: "BENCH_SERVERS", value: "inlined", limits: "one of worker, inline" },
    { bench: "gate", variable: "BENCH_SERVERS", value: "", limits: "one of worker, inline" },
    { bench: "ledger", variable: "BENCH_VELOCITY_FLOOD", value: "-5", limits: "a whole number from 0 to 1000000" },
    { bench: "evidence", variable: "BENCH_VERIFY_ENTRIES", value: "1e5", limits: "a whole number from 1 to 10000000" },
    { bench: "observer", variable: "BENCH_CONCURRENCY", value: "0", limits: "a whole number from 1 to 256" },
    { bench: "ingest", variable: "BENCH_ROUNDS", value: "three", limits: "a whole number from 1 to 100" },
    { bench: "ingest", variable: "BENCH_DELIVERIES", value: " 40", limits: "a whole number from 1 to 10000" },
    { bench: "pg", variable: "BENCH_WARMUP_SECONDS", value: "61", limits: "a number from 0 to 60" },
    { bench: "pg", variable: "BENCH_LOOPS", value: "0x20", limits: "a whole number from 1 to 1000" },
  ];
  it.each(cases)("bench $bench with $variable=$value says its limits in one line, exit 2, before any work", async ({ bench, variable, value, limits }) => {
    const result = await runBursar(["bench", bench], { [variable]: value }, undefined, 30_000);
    expect(result.stderr).toBe(`bench:${bench}: ${variable}=${JSON.stringify(value)}: expected ${limits}\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });

  it("bench pg with an unreachable BURSAR_BENCH_PG names it, password masked, exit 2", async () => {
    const result = await runBursar(["bench", "pg"], { BURSAR_BENCH_PG: "postgres://postgres:hunter2@127.0.0.1:1/x" }, undefined, 30_000);
    expect(result.stderr).toBe("bench:pg: BURSAR_BENCH_PG=postgres://postgres:***@127.0.0.1:1/x: cannot reach PostgreSQL (connect ECONNREFUSED 127.0.0.1:1)\n");
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });

  const server = postgresServerUrl();
  it.skipIf(server === undefined)("bench pg with a BURSAR_BENCH_PG whose database does not exist names it, exit 2", async () => {
    const url = new URL(server!);
    url.pathname = "/bursar_bench_no_such_database";
    const result = await runBursar(["bench", "pg"], { BURSAR_BENCH_PG: url.href }, undefined, 30_000);
    expect(result.stderr).toMatch(/^bench:pg: BURSAR_BENCH_PG=\S+\/bursar_bench_no_such_database: cannot reach PostgreSQL \(database "bursar_bench_no_such_database" does not exist\)\n$/);
    expect(result.code).toBe(2);
  });
});
