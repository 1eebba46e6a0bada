// One version everywhere (bursar --version, the MCP server's and buyer's info, the signed
// genesis and start entries), equal to package.json's; `bursar help COMMAND` is that command's
// help; the commands a start suggests to fix a data directory's modes paste into a shell as one
// word per path, however the path is spelled.

import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import { buyer_client_info } from "../../src/buyer/connect.js";
import { main } from "../../src/cli/main.js";
import { shellWord } from "../../src/datadir.js";
import { server_info } from "../../src/server/mcp.js";
import { version } from "../../src/version.js";
import { bursar_bin, ensureBuilt, repo_root } from "../support/build.js";

function io() {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  return { io: { stdout, stderr, env: {}, interactive: false, stderr_interactive: false }, out: () => out };
}

describe("bursar's version", () => {
  it("is package.json's, wherever it is named", async () => {
    const packaged = (JSON.parse(readFileSync(join(repo_root, "package.json"), "utf8")) as { version: string }).version;
    expect(version).toBe(packaged);
    expect(server_info.version).toBe(packaged);
    expect(buyer_client_info.version).toBe(packaged);
    const run = io();
    expect(await main(["--version"], run.io)).toBe(0);
    expect(run.out()).toBe(`bursar ${packaged}\n`);
  });
});

describe("bursar help COMMAND", () => {
  beforeAll(() => ensureBuilt());

  it("prints that command's help, as bursar COMMAND --help does", () => {
    const asked = execFileSync(process.execPath, [bursar_bin, "help", "serve"], { encoding: "utf8" });
    expect(asked).toBe(execFileSync(process.execPath, [bursar_bin, "serve", "--help"], { encoding: "utf8" }));
    expect(asked).toMatch(/^usage: bursar serve/);
  });
});

describe("bursar's own arguments", () => {
  function run() {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = "";
    let err = "";
    stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
    return { io: { stdout, stderr, env: {}, interactive: false, stderr_interactive: false }, out: () => out, err: () => err };
  }

  it.each([
    [[], "bursar: no command given"],
    [["help", "serve", "agent"], "bursar: help takes one command name, not 2 words"],
    [["--version", "extra"], 'bursar: --version takes no arguments (given "extra")'],
    [["-h", "extra"], 'bursar: -h takes no arguments (given "extra")'],
    [["help", "--version"], 'bursar: help takes a command name, not an option (given "--version")'],
  ])("%j is a usage error on stderr, exit 2, with the list of commands", async (argv, message) => {
    const asked = run();
    expect(await main(argv, asked.io)).toBe(2);
    expect(asked.out()).toBe("");
    expect(asked.err()).toMatch(new RegExp(`^${message.replace(/[()]/g, "\\$&")}\n\nusage: bursar <command>`));
  });

  it("takes --help after -- as an argument, not a request for help", () => {
    ensureBuilt();
    const asked = spawnSync(process.execPath, [bursar_bin, "verify", "--", "--help"], { encoding: "utf8" });
    expect(asked.status).toBe(2);
    expect(asked.stdout).toBe("");
    expect(asked.stderr).toMatch(/^bursar verify: /);
  });
});

describe("shellWord", () => {
  it.each(["/srv/bursar", "/tmp/rv ww dir", "/tmp/it's", "/tmp/$HOME `x` !", "/tmp/ünï-😀", "/tmp/a\u001b[31mred\nline", "-rf", "/tmp/back\\slash'"])("%j pastes as itself", (path) => {
    const word = shellWord(path);
    expect(word).not.toMatch(/[\u0000-\u001f]/);
    expect(execFileSync("bash", ["-c", `printf %s ${word}`], { encoding: "utf8" })).toBe(path);
  });
});
