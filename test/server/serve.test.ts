// The server skeleton: healthz, JSON errors, body limits, first-run token, configuration
// errors naming the variable, and graceful shutdown of a real `bursar serve` process (on
// SIGTERM, SIGHUP, or its stdout closed).

import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createBursar } from "../../src/index.js";
import { configDigest, memory_database_warning, startServer } from "../../src/server/start.js";
import { bursar_bin, builtSuiteDir } from "../support/build.js";
import { manualClock } from "../support/clock.js";
import { pipedThroughHead, runBursar, startBursar } from "../support/process.js";
import { waitUntil, within } from "../support/wait.js";

/** The JSON log lines in `output`, parsed. */
function logLines(output: string): Record<string, unknown>[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("bursar serve", () => {
  const dir = builtSuiteDir("bursar-serve-");

  it("answers /healthz, maps errors to JSON and stores only the operator token hash", async () => {
    const config = loadConfig({ BURSAR_DATA_DIR: join(dir(), "a"), BURSAR_PORT: "0" });
    const started = await startServer(config, { logger: false });
    try {
      expect(started.generated_token).toMatch(/^bsr_op_/);
      expect(statSync(join(dir(), "a", "operator-token.sha256")).mode & 0o777).toBe(0o600);
      expect(await (await fetch(`${started.url}/healthz`)).json()).toEqual({ ok: true });
      const missing = await fetch(`${started.url}/nope`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ error: { code: "not_found" } });
      // An id quoted in a message keeps its control and bidirectional characters as escapes, so a
      // client printing the message cannot be made to repaint or reorder its terminal.
      const quoted = await fetch(`${started.url}/api/v1/blocks/blk_%1B%5B31m%E2%80%AEx`, { headers: { authorization: `Bearer ${started.generated_token}` } });
      expect(await quoted.json()).toEqual({ error: { code: "not_found", message: "no block blk_\\u{1b}[31m\\u{202e}x" } });
      // A NUL in an id (PostgreSQL cannot take it as a parameter) is refused before any look-up.
      for (const path of ["/ingest/src%00x", "/api/v1/blocks/blk_%00", "/observe/bsr_obs_%00"]) {
        const nul = await fetch(`${started.url}${path}`, { method: "POST" });
        expect(nul.status, path).toBe(400);
        expect(await nul.json()).toMatchObject({ error: { code: "malformed" } });
      }
    } finally {
      await started.app.close();
    }
    const again = await startServer(config, { logger: false });
    expect(again.generated_token).toBeUndefined();
    expect(again.operator.configured).toBe(true);
    await again.app.close();
  });

  it("takes DESIGN.md's defaults for what is unset, and refuses a checkpoint period outside 1 to 86,400 s naming the range", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      data_dir: resolve(".bursar"),
      db: resolve(".bursar", "bursar.db"),
      host: "127.0.0.1",
      port: 8787,
      provider: "simulator",
      allow_live: false,
      log_origin: "bursar.local/log",
      checkpoint_every: 1000,
      checkpoint_seconds: 10,
    });
    expect(config.admin_token).toBeUndefined();
    for (const seconds of ["0", "86401"]) {
      expect(() => loadConfig({ BURSAR_CHECKPOINT_SECONDS: seconds })).toThrow(`BURSAR_CHECKPOINT_SECONDS="${seconds}": expected an integer from 1 to 86400`);
    }
    expect(loadConfig({ BURSAR_CHECKPOINT_SECONDS: "86400" }).checkpoint_seconds).toBe(86_400);
  });

  it("stops the start with one line naming a bad variable", () => {
    expect(() => loadConfig({ BURSAR_PORT: "eighty" })).toThrow(/BURSAR_PORT="eighty": expected an integer/);
    expect(() => loadConfig({ BURSAR_PROVIDER: "stripe" })).toThrow(/BURSAR_PROVIDER="stripe": expected one of simulator, razorpay/);
    expect(() =>
      loadConfig({ BURSAR_PROVIDER: "razorpay", RAZORPAY_KEY_ID: "rzp_live_abc", RAZORPAY_KEY_SECRET: "s", RAZORPAY_WEBHOOK_SECRET: "w" }),
    ).toThrow(/BURSAR_ALLOW_LIVE/);
    // A live key's secret goes over https only, or to this machine; a test key may use plain http.
    const live = { BURSAR_PROVIDER: "razorpay", RAZORPAY_KEY_ID: "rzp_live_abc", RAZORPAY_KEY_SECRET: "s", RAZORPAY_WEBHOOK_SECRET: "w", BURSAR_ALLOW_LIVE: "1" };
    expect(() => loadConfig({ ...live, RAZORPAY_BASE_URL: "http://proxy.example" })).toThrow(/RAZORPAY_BASE_URL="http:\/\/proxy.example": a live key's secret is sent only over https/);
    for (const base of ["https://api.razorpay.com", "http://127.0.0.1:8788", "http://localhost:8788"]) {
      expect(loadConfig({ ...live, RAZORPAY_BASE_URL: base }).razorpay.base_url).toBe(base);
    }
    expect(loadConfig({ ...live, RAZORPAY_KEY_ID: "rzp_test_abc", RAZORPAY_BASE_URL: "http://proxy.example" }).provider).toBe("razorpay");
    // A token with a space could be set but never sent as a bearer token.
    expect(() => loadConfig({ BURSAR_ADMIN_TOKEN: "correct horse battery staple" })).toThrow(/BURSAR_ADMIN_TOKEN: expected visible ASCII characters only/);
    // Razorpay keeps its orders and payments; holds and evidence in memory would not outlive the process.
    const test_keys = { ...live, RAZORPAY_KEY_ID: "rzp_test_abc" };
    expect(() => loadConfig({ ...test_keys, BURSAR_DB: ":memory:" })).toThrow(/^BURSAR_DB=:memory: is refused with BURSAR_PROVIDER=razorpay: .*set BURSAR_DB to a file or a postgres:\/\/ URL$/);
    // A webhook secret rotation: the replaced secret beside the new one, never the same value again.
    expect(loadConfig({ ...test_keys, RAZORPAY_WEBHOOK_SECRET_PREVIOUS: "old" }).razorpay).toMatchObject({ webhook_secret: "w", webhook_secret_previous: "old" });
    expect(() => loadConfig({ ...test_keys, RAZORPAY_WEBHOOK_SECRET_PREVIOUS: "w" })).toThrow(
      "RAZORPAY_WEBHOOK_SECRET_PREVIOUS equals RAZORPAY_WEBHOOK_SECRET (the value is not shown): set it to the secret the rotation replaced, or leave it unset",
    );
  });

  it("BURSAR_DB=:memory: with the simulator serves, and says once that nothing outlives the process", async () => {
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "memory"), BURSAR_DB: ":memory:", BURSAR_ADMIN_TOKEN: "" });
    expect(await server.stop()).toBe(0);
    const warnings = logLines(server.output()).filter((line) => String(line.msg).startsWith("BURSAR_DB=:memory:"));
    expect(warnings).toEqual([expect.objectContaining({ level: 40, msg: memory_database_warning })]);
  });

  it("says at the start when its clock starts ahead of the host's: the log's newest entry is later", async () => {
    const data_dir = join(dir(), "ahead");
    const first = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" });
    expect(await first.stop()).toBe(0);
    // An entry written while the host's clock ran half an hour ahead (since stepped back).
    const ahead = await createBursar({ db: join(data_dir, "bursar.db"), signingKey: readFileSync(join(data_dir, "signing-key.pem"), "utf8"), clock: manualClock(Date.now() + 1_800_000) });
    await ahead.log.recordStart("ahead");
    await ahead.close();

    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" });
    expect(await server.stop()).toBe(0);
    const warnings = logLines(server.output()).filter((line) => String(line.msg).startsWith("the clock starts"));
    expect(warnings).toEqual([expect.objectContaining({ level: 40, ahead_ms: expect.any(Number) })]);
    expect(warnings[0]?.msg).toMatch(/^the clock starts 1[78]\d\d s ahead of this host's: .* Bursar's time stands still until the host's catches up/);
  });

  it("refuses to start when the log's newest entry is over an hour ahead, naming BURSAR_CLOCK_FROM_HOST, which starts it", async () => {
    const data_dir = join(dir(), "years-ahead");
    const first = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" });
    expect(await first.stop()).toBe(0);
    const ahead = await createBursar({ db: join(data_dir, "bursar.db"), signingKey: readFileSync(join(data_dir, "signing-key.pem"), "utf8"), clock: manualClock(Date.now() + 3 * 365 * 86_400_000) });
    await ahead.log.recordStart("years ahead");
    await ahead.close();

    const refused = await runBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "" }, undefined, 20_000);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^bursar serve: BURSAR_DB=.*: the log's newest entry was received at .* h ahead of the clock .*BURSAR_CLOCK_FROM_HOST=1/)]);

    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: "", BURSAR_CLOCK_FROM_HOST: "1" });
    expect(await server.stop()).toBe(0);
    expect(logLines(server.output()).filter((line) => String(line.msg).startsWith("the clock starts"))).toEqual([]);
  });

  it("system.start's config digest hashes the database as shown: a postgres password changes nothing in it", () => {
    const digest = (db: string) => configDigest(loadConfig({ BURSAR_DB: db }));
    expect(digest("postgres://bursar:first-password@db.internal/bursar")).toBe(digest("postgres://bursar:second-password@db.internal/bursar"));
    expect(digest("postgres://bursar@db.internal/bursar?password=first")).toBe(digest("postgres://bursar@db.internal/bursar?password=second"));
    expect(digest("postgres://bursar:pw@db.internal/bursar")).not.toBe(digest("postgres://bursar:pw@db.internal/other"));
  });

  it("shuts down gracefully on SIGTERM and exits 0", async () => {
    const child = spawn(process.execPath, [bursar_bin, "serve", "--port", "0"], {
      env: { ...process.env, BURSAR_DATA_DIR: join(dir(), "b"), BURSAR_LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let errors = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listen line: ${output}`)), 15_000);
      child.stdout.on("data", () => {
        if (output.includes("listening on")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const url = /listening on (\S+)/.exec(output)?.[1] as string;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // The generated token and the next steps go to stderr, apart from stdout's logs.
    await waitUntil("the next steps on stderr", () => errors.includes("bursar agent create"));
    expect(output).not.toContain("bsr_op_");
    expect(output + errors).not.toMatch(/Cannot call addHook|bursar: /);
    const code = await new Promise<number | null>((resolve) => {
      child.on("exit", (exit) => resolve(exit));
      child.kill("SIGTERM");
    });
    expect(code).toBe(0);
  });

  it("a bad variable makes the CLI exit 2 with the variable named", async () => {
    const child = spawn(process.execPath, [bursar_bin, "serve"], {
      env: { ...process.env, BURSAR_DATA_DIR: join(dir(), "c"), BURSAR_CHECKPOINT_EVERY: "-1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let errors = "";
    child.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(2);
    expect(errors.trim().split("\n")[0]).toMatch(/BURSAR_CHECKPOINT_EVERY/);
  });

  it("SIGHUP stops it gracefully and exits 0, as SIGTERM does", async () => {
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "hup"), BURSAR_LOG_LEVEL: "info" });
    // fetch keeps its connection alive: idle now, it must not hold the close.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    // Before, Node's default for SIGHUP killed the process at once, without a word.
    expect(await within("the process to exit", server.stop("SIGHUP"), 10_000)).toBe(0);
    expect(logLines(server.stdout()).find((line) => line.msg === "shutting down")).toMatchObject({ signal: "SIGHUP" });
  });

  it("stdout closed before the listen line ('bursar serve | head -0'): says so on stderr, shows the token, stops and exits 141", async () => {
    const child = spawn(process.execPath, [bursar_bin, "serve", "--port", "0"], {
      env: { ...process.env, BURSAR_DATA_DIR: join(dir(), "epipe-start"), BURSAR_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    // The reader goes away at once: every write to stdout fails with EPIPE.
    child.stdout.destroy();
    let errors = "";
    child.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()));
    const code = await within("the process to exit", new Promise<number | null>((resolve) => child.once("exit", resolve)), 20_000);
    // Before, the listen line's write ended the process with an unhandled 'error' event's stack trace, exit 1.
    expect(code).toBe(141);
    // Once, though the stream and the log's destination both report the failure.
    expect(errors.split("bursar serve: stdout was closed (EPIPE): the JSON logs cannot be written; stopping").length - 1).toBe(1);
    // The token's hash was stored: the token is shown, on stderr, which is still open.
    expect(errors).toMatch(/ {2}bsr_op_\S+/);
    expect(errors).not.toMatch(/Unhandled|\n\s+at /);
  });

  it("stdout and stderr one pipe that closes ('bursar serve 2>&1 | head -1'): stops and exits 141, where it wrote the stderr warning to the dead pipe forever", async () => {
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(bursar_bin)} serve --port 0`;
    expect(await pipedThroughHead(command, { BURSAR_DATA_DIR: join(dir(), "epipe-both"), BURSAR_LOG_LEVEL: "info" })).toBe(141);
  });

  it("stdout read for one line ('bursar serve 2>err | head -1'): stops, exits 141 and says why once on stderr", async () => {
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(bursar_bin)} serve --port 0`;
    const stderr_file = join(dir(), "epipe-head.err");
    expect(await pipedThroughHead(command, { BURSAR_DATA_DIR: join(dir(), "epipe-head"), BURSAR_LOG_LEVEL: "info" }, 30_000, stderr_file)).toBe(141);
    // The stream and the log's destination both report the failure: before, it was said twice.
    const errors = readFileSync(stderr_file, "utf8");
    expect(errors.split("bursar serve: stdout was closed (EPIPE): the JSON logs cannot be written; stopping").length - 1).toBe(1);
  });

  it("stdout closed while serving: the next log line fails, and it stops gracefully and exits 141 rather than serve unlogged", async () => {
    const server = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: join(dir(), "epipe-later"), BURSAR_LOG_LEVEL: "info" });
    server.child.stdout.destroy();
    // Logged at info ("incoming request"): that write fails. Before, pino dropped it and every
    // later line without a word, and the server went on with no logs.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect(await within("the process to exit", new Promise((resolve) => server.child.once("exit", resolve)), 10_000)).toBe(141);
    expect(server.output().split("bursar serve: stdout was closed (EPIPE)").length - 1).toBe(1);
  });
});
