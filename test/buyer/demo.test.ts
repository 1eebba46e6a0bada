// `bursar demo` tells the whole story: at least three allowed, one held and approved, at
// least three refusals with rule ids, one settled, the log verified — in-process, and from
// a clean clone with the README's quick-start command (npm ci from the lockfile, then the demo).

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runDemo } from "../../src/buyer/demo.js";
import { repo_root } from "../support/build.js";

const run = promisify(execFile);

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

  // Each step is awaited with a bound of its own, so a stuck one (npm ci waiting on the
  // network, say) fails this test by its timeout instead of stopping the whole run.
  it("runs from a clean clone with `npm ci && npm run demo`", { timeout: 600_000 }, async () => {
    await run("git", ["rev-parse", "HEAD"], { cwd: repo_root, timeout: 30_000 }).catch(() => {
      throw new Error("not a git checkout: the quick-start test needs the repository");
    });
    const dir = mkdtempSync(join(tmpdir(), "bursar-clone-"));
    try {
      const clone = join(dir, "bursar");
      await run("git", ["clone", "--quiet", repo_root, clone], { timeout: 60_000 });
      // --prefer-offline: the packages are in npm's cache from this checkout's own install, so
      // the clone installs from the lockfile without asking the registry again.
      const env = { ...process.env, CI: "true" };
      await run("npm", ["ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], { cwd: clone, env, timeout: 420_000, maxBuffer: 64 << 20 });
      const demo = await run("npm", ["run", "--silent", "demo"], { cwd: clone, env, timeout: 120_000, encoding: "utf8" });
      checkStory(demo.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
