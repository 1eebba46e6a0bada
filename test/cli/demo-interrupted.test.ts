// `bursar demo` interrupted (SIGINT, SIGTERM) as a real process: it stops its servers, deletes
// its temporary data directory (signing key, master key, webhook secret, database) and exits
// with the signal's status, 128 + its number.

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { builtSuiteDir, bursar_bin } from "../support/build.js";
import { pipedThroughHead } from "../support/process.js";
import { waitUntil, within } from "../support/wait.js";

const suite_dir = builtSuiteDir("bursar-demo-interrupted-");

/** Starts `bursar demo` with TMPDIR set to a directory of its own, so its bursar-demo-* is the only entry there. */
function startDemo(tmp: string) {
  const child = spawn(process.execPath, [bursar_bin, "demo"], { env: { ...process.env, TMPDIR: tmp, CI: "1" }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

describe("bursar demo interrupted", () => {
  for (const [signal, status] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    it(`on ${signal} deletes its temporary data directory and exits ${status}`, async () => {
      const tmp = join(suite_dir(), signal);
      mkdirSync(tmp);
      const demo = startDemo(tmp);
      try {
        // The heading is printed once the gate is up (the data directory holds its keys and
        // database); the story still has dozens of round trips to go, so the signal lands mid-story.
        await waitUntil("the demo's first line", () => demo.stdout().includes("Bursar demo") || demo.child.exitCode !== null);
        const entries = readdirSync(tmp).filter((name) => name.startsWith("bursar-demo-"));
        expect(entries, demo.stdout() + demo.stderr()).toHaveLength(1);
        const dir = join(tmp, entries[0]!);
        expect(existsSync(join(dir, "bursar.db"))).toBe(true);
        demo.child.kill(signal);
        const exit = await within("the demo to exit", demo.exited);
        expect(readdirSync(tmp), `left behind after ${signal}`).toEqual([]);
        expect(exit, demo.stdout() + demo.stderr()).toEqual({ code: status, signal: null });
        expect(demo.stderr()).toBe(`bursar demo: ${signal}: stopping the servers and deleting ${dir}\n`);
      } finally {
        if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill("SIGKILL");
      }
    });
  }

  it("deletes its directory and exits 141 when its output is closed under it (bursar demo | head)", async () => {
    const tmp = join(suite_dir(), "EPIPE");
    mkdirSync(tmp);
    const demo = startDemo(tmp);
    try {
      await waitUntil("the demo's first line", () => demo.stdout().includes("Bursar demo") || demo.child.exitCode !== null);
      const [entry] = readdirSync(tmp).filter((name) => name.startsWith("bursar-demo-"));
      expect(entry, demo.stdout() + demo.stderr()).toBeDefined();
      // What head does once it has its lines: the pipe's reading end goes away.
      demo.child.stdout.destroy();
      const exit = await within("the demo to exit", demo.exited);
      expect(readdirSync(tmp), "left behind after EPIPE").toEqual([]);
      expect(exit, demo.stderr()).toEqual({ code: 141, signal: null });
      expect(demo.stderr()).toBe(`bursar demo: its output was closed (EPIPE): stopping the servers and deleting ${join(tmp, entry!)}\n`);
    } finally {
      if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill("SIGKILL");
    }
  });

  it("does the same when stderr goes to the closed pipe too (bursar demo 2>&1 | head), where its notice cannot be written", async () => {
    const tmp = join(suite_dir(), "EPIPE-both");
    mkdirSync(tmp);
    const status = await pipedThroughHead(`${JSON.stringify(process.execPath)} ${JSON.stringify(bursar_bin)} demo`, { TMPDIR: tmp, CI: "1" });
    expect(status).toBe(141);
    expect(readdirSync(tmp), "left behind after EPIPE").toEqual([]);
  });
});
