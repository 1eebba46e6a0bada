// The test watchdog (watchdog.ts): a file whose event loop stands still for good does not hang
// the run. Runs vitest on the files in stall/ with the stall limit cut to 3 s.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { repo_root } from "./build.js";
import { runGroup } from "./process.js";

/** How long waiting.stall.ts sleeps: the run's own, so no other sleep on the machine is taken for it. */
const sleep_seconds = String(3_000 + Math.floor(Math.random() * 900_000));

function runStallSuite() {
  const vitest = join(repo_root, "node_modules/vitest/vitest.mjs");
  const env: NodeJS.ProcessEnv = { ...process.env, BURSAR_TEST_STALL_MS: "3000", BURSAR_TEST_STALL_SLEEP: sleep_seconds, NO_COLOR: "1" };
  delete env.CI;
  // Without the watchdog the run never ends; 45 s is the bound of this test, not a speed check.
  return runGroup(process.execPath, [vitest, "run", "--config", "test/support/stall/vitest.config.ts"], { cwd: repo_root, env, timeout_ms: 45_000 });
}

/** Processes still running (not zombies) whose command line is exactly `command`. */
function running(command: string): string[] {
  const listing = execFileSync("ps", ["-e", "-o", "stat=,args="], { encoding: "utf8" });
  return listing.split("\n").filter((line) => /^[^Z]\S*\s/.test(line) && line.replace(/^\S+\s+/, "") === command);
}

it("kills a test process that stands still, and any process it waits on, naming file and test; the run goes on to fail", async () => {
  const stall = await runStallSuite();
  const run = { ...stall, output: stall.stdout + stall.stderr };
  expect(run.timed_out, run.output).toBe(false);
  expect(run.code, run.output).toBe(1);
  expect(run.output).toMatch(/watchdog: test process \d+ stood still for \d+ s in test\/support\/stall\/blocked\.stall\.ts > stands still; its threads' native stacks follow, then it is killed\n/);
  expect(run.output).toMatch(/watchdog: test process \d+ stood still for \d+ s in test\/support\/stall\/waiting\.stall\.ts > waits on a child; its threads' native stacks follow, then it is killed with the processes it started\n/);
  expect(run.output).toMatch(new RegExp(`^\\s*\\d+\\s+\\S+ sleep ${sleep_seconds}$`, "m"));
  expect(running(`sleep ${sleep_seconds}`)).toEqual([]);
  expect(run.output.match(/Worker exited unexpectedly/g)).toHaveLength(2);
  expect(run.output).toMatch(/✓ .*moving\.stall\.ts/);
  // gdb is on CI's machine and may attach there (root); elsewhere the output says why not.
  if (!existsSync("/usr/bin/gdb")) expect(run.output).toContain("watchdog: no native stacks");
  else if (!run.output.includes("ptrace:")) expect(run.output).toMatch(/Thread 1 .*\n#0 /);
}, 60_000);
