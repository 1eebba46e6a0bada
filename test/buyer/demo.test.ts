// `bursar demo` tells the whole story: at least three allowed, one held and approved, at
// least three refusals with rule ids, one settled, the log verified — in-process, and from
// a clean clone with the README's quick-start command (npm ci from the lockfile, then the demo;
// here offline from npm's cache, with better-sqlite3 compiled rather than its prebuilt binary
// fetched, as this machine reaches no GitHub).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { runDemo } from "../../src/buyer/demo.js";
import { repo_root } from "../support/build.js";
import { runGroup } from "../support/process.js";

function checkStory(text: string): void {
  expect(text.match(/^\s+ALLOW\s+create_order/gm)?.length ?? 0).toBeGreaterThanOrEqual(3);
  expect(text).toMatch(/^\s+HOLD\s+create_order/m);
  expect(text).toMatch(/^\s+APPROVE\s+apr_\S+ approved/m);
  const rules = [...text.matchAll(/^\s+BLOCK\s+.*: (R\d|ALLOWLIST|CALLER) — /gm)].map((match) => match[1]);
  expect(rules.length).toBeGreaterThanOrEqual(3);
  expect(text).toMatch(/^\s+PAY\s+/m);
  expect(text).toMatch(/^\s+ALLOW\s+capture_payment/m);
  expect(text).toMatch(/^\s+WEBHOOK\s+payment\.captured: signature verified/m);
  expect(text).toMatch(/^\s+VERIFY\s+\d+ log entries/m);
  expect(text).toMatch(/1 settled, log verified\.$/m);
  expect(text).not.toMatch(/\u001b\[/);
}

describe("bursar demo", () => {
  it("tells the story in-process, in plain text when not on a terminal", async () => {
    const out = new PassThrough();
    let text = "";
    out.on("data", (chunk: Buffer) => (text += chunk.toString()));
    const result = await runDemo(out, false);
    expect(result.verified).toBe(true);
    expect(result.settled).toBe(1);
    checkStory(text);
  });

  // Each step runs with a bound of its own, its process group killed past it, so a stuck one
  // (npm ci waiting on the network, say) fails this test naming it instead of stalling the run.
  // The steps' bounds add up to 600 s; the test's own is past them, so a step is always named.
  it("runs from a clean clone with `npm ci && npm run demo`", { timeout: 660_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "bursar-clone-"));
    const clone = join(dir, "bursar");
    // --prefer-offline and build_from_source: the packages are in npm's cache from this checkout's
    // own install, and better-sqlite3 is compiled here rather than first asked of GitHub, which
    // this machine cannot reach; so the clone installs from the lockfile with no network.
    const env = { ...process.env, CI: "true", npm_config_build_from_source: "true" };
    const steps: Array<[string, string[], string, number]> = [
      ["git", ["clone", "--quiet", repo_root, clone], dir, 60_000],
      ["npm", ["ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], clone, 420_000],
      ["npm", ["run", "--silent", "demo"], clone, 120_000],
    ];
    try {
      let demo = "";
      for (const [command, args, cwd, timeout_ms] of steps) {
        const step = await runGroup(command, args, { cwd, env, timeout_ms });
        const what = `${command} ${args[0]}`;
        expect(step.timed_out, `${what} ran past ${timeout_ms} ms\n${step.stderr}`).toBe(false);
        expect(step.code, `${what} failed\n${step.stderr}`).toBe(0);
        demo = step.stdout;
      }
      checkStory(demo);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
