// Running Bursar the ways the README and package give: `npm run serve` passes a supervisor's
// SIGTERM on to the server, which stops gracefully (its script execs node; through a shell that
// does not, npm exited and left the server running, holding its port and database), and the
// executable refuses a Node.js older than package.json's engines with one line.

import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { isMissingModule } from "../../src/cli/main.js";
import { node_version_min, nodeTooOld } from "../../src/cli/node-version.js";
import { builtSuiteDir, repo_root } from "../support/build.js";
import { waitUntil } from "../support/wait.js";

describe("npm run serve", () => {
  const dir = builtSuiteDir("bursar-npm-scripts-");

  it("stops gracefully, exit 0, when npm alone is sent SIGTERM (as a supervisor or `docker stop` does)", async () => {
    const npm = spawn("npm", ["run", "--silent", "serve", "--", "--port", "0"], {
      cwd: repo_root,
      env: { ...process.env, BURSAR_DATA_DIR: join(dir(), "data"), BURSAR_ADMIN_TOKEN: "", BURSAR_LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    npm.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once("exit", resolve));
    try {
      const url = await waitUntil("the listen line", () => /listening on (http:\/\/\S+)/.exec(output)?.[1], { timeout_ms: 30_000 });
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      npm.kill("SIGTERM");
      expect(await exited).toBe(0);
      // The server itself stopped: nothing listens there any more.
      await waitUntil("the server gone", () => fetch(`${url}/healthz`).then(() => false, () => true), { timeout_ms: 10_000 });
    } finally {
      npm.kill("SIGKILL");
    }
  });

  it("package.json's serve and demo scripts exec node, so signals reach it", () => {
    const scripts = (JSON.parse(readFileSync(join(repo_root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.serve).toMatch(/^exec node /);
    expect(scripts.demo).toMatch(/^exec node /);
  });
});

describe("the Node.js version", () => {
  it.each([
    ["18.20.4", true],
    ["20.0.0", true],
    ["20.11.1", true],
    ["20.18.9", true],
    ["20.19.0", false],
    ["20.20.2", false],
    ["22.1.0", false],
    ["100.0.0", false],
  ])("%s is too old: %s", (version, too_old) => {
    const line = nodeTooOld(version);
    expect(line !== undefined).toBe(too_old);
    if (line) expect(line).toBe(`bursar: Node.js ${version} is too old: bursar needs Node.js ${node_version_min} or later`);
  });

  it("is package.json's engines", () => {
    const engines = (JSON.parse(readFileSync(join(repo_root, "package.json"), "utf8")) as { engines: { node: string } }).engines;
    expect(`>=${node_version_min}`.replace(/\.0$/, "")).toBe(engines.node);
  });
});

describe("a command whose module cannot load", () => {
  const dir = builtSuiteDir("bursar-missing-module-");

  it("is unknown only when its own file is missing, not when a package it imports is (a broken install)", () => {
    const command = join(dir(), "command.mjs");
    writeFileSync(command, 'import "bursar-no-such-package";\n');
    // In Node itself (vitest's module runner words these errors its own way).
    const script = `
      import { isMissingModule } from ${JSON.stringify(pathToFileURL(join(repo_root, "dist/src/cli/main.js")).href)};
      const answers = [];
      for (const url of [${JSON.stringify(pathToFileURL(command).href)}, ${JSON.stringify(pathToFileURL(join(dir(), "absent.mjs")).href)}]) {
        answers.push(await import(url).then(() => "loaded", (error) => isMissingModule(error, new URL(url))));
      }
      console.log(JSON.stringify(answers));`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(JSON.parse(run.stdout)).toEqual([false, true]);
  });
});
