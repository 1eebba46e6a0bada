// bursar bench NAME: runs one built benchmark (dist/bench/NAME.js) in a child node process with
// this process's environment, its output passed through and its exit code returned.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { println, signalExitCode, UsageError, type CliIo } from "../command.js";

/** Each is bench/NAME.ts, compiled to dist/bench/NAME.js beside dist/src. */
export const bench_names = ["ledger", "evidence", "gate", "pg", "ingest", "observer"] as const;

export const bench_dir = join(import.meta.dirname, "..", "..", "..", "bench");

export const help = `usage: bursar bench NAME [ARGS...]

Runs one benchmark in its own node process with the same environment and passes its
output and exit code through. Each prints ratios measured side by side in one run, not
absolute claims; see the README's "Benchmarks". Without NAME, lists them.

benchmarks:
  ledger     durable authorizations/s beside raw SQLite commits/s
  evidence   durable evidence appends/s and offline verify entries/s beside raw SHA-256
  gate       the same MCP client through Bursar and through a bare SDK server
  pg         decisions/s on PostgreSQL with 1, 2 and 4 processes (BURSAR_BENCH_PG or
             BURSAR_TEST_PG, default postgres://postgres@127.0.0.1:5432/test; docs/postgres.md)
  ingest     signed decision-record deliveries/s beside a bare Node http server
  observer   an MCP client through the chained observer and directly

Environment: each benchmark's own BENCH_* knobs (e.g. BENCH_SECONDS; the README's
Benchmarks section lists them all, with their limits); all variables are passed to the child
unchanged. A knob set but empty, not a number or outside its limits, or a BURSAR_BENCH_PG that
bench pg cannot reach, stops the benchmark before any work: one line, exit 2.`;

function listing(): string {
  return `benchmarks: ${bench_names.join(", ")} (run: bursar bench NAME)`;
}

function isBenchName(name: string): name is (typeof bench_names)[number] {
  return (bench_names as readonly string[]).includes(name);
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    println(io.stdout, listing());
    return 0;
  }
  if (!isBenchName(name)) throw new UsageError(`unknown benchmark ${JSON.stringify(name)}; ${listing()}`);
  const script = join(bench_dir, `${name}.js`);
  if (!existsSync(script)) throw new UsageError(`${script} is missing; build first (npm run build)`);
  // Inherit the terminal when writing to it, so a benchmark still sees a TTY for its progress bar.
  const direct = io.stdout === process.stdout && io.stderr === process.stderr;
  const child = spawn(process.execPath, [script, ...rest], { env: io.env, stdio: direct ? "inherit" : ["inherit", "pipe", "pipe"] });
  child.stdout?.pipe(io.stdout, { end: false });
  child.stderr?.pipe(io.stderr, { end: false });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on("SIGINT", forward).on("SIGTERM", forward);
  try {
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (exit_code, exit_signal) => resolve([exit_code, exit_signal]));
    });
    return signal ? signalExitCode(signal) : (code ?? 1);
  } finally {
    process.off("SIGINT", forward).off("SIGTERM", forward);
  }
}
