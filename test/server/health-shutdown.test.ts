// /healthz reflects the database; a shutdown waits for the requests in flight and no longer (their
// kept-alive connections, idle or half-sent ones do not hold it open), one that runs out of grace
// says how many requests it abandoned, and a second signal ends it at once, saying so.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import type { SqliteDriver } from "../../src/ledger/sqlite.js";
import { startServer } from "../../src/server/start.js";
import { same_signal_window_ms } from "../../src/server/app.js";
import { rawToolCall, testServer } from "../support/server.js";
import { dist_index, builtSuiteDir } from "../support/build.js";
import { waitUntil, within } from "../support/wait.js";

/** A server from the built app.ts with a /slow route: its handler says when it runs, then answers once a line comes on stdin. */
function slowServerScript(shutdown_grace_ms: number): string {
  return `const { buildServer, GracefulStop, loggerOptions } = await import(${JSON.stringify(join(dist_index, "../server/app.js"))});
const app = await buildServer({
  logger: loggerOptions("info"),
  shutdown_grace_ms: ${shutdown_grace_ms},
  plugins: [(app) => {
    app.get("/fast", async () => ({ fast: true }));
    app.get("/slow", () => (console.log("slow request in handler"), new Promise((resolve) => process.stdin.once("data", () => resolve({ slow: true })))));
  }],
});
await app.listen({ host: "127.0.0.1", port: 0 });
new GracefulStop((line) => process.stderr.write(line + "\\n")).attach(app);
console.log("url http://127.0.0.1:" + app.server.address().port);`;
}

async function spawnScript(path: string, script: string): Promise<{ child: ChildProcessWithoutNullStreams; url: string; output(): string; exited: Promise<number | null> }> {
  writeFileSync(path, script);
  const child = spawn(process.execPath, [path], { stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const url = await waitUntil("the server's url line", () => /url (\S+)\n/.exec(output)?.[1]);
  return { child, url, output: () => output, exited };
}

/** A raw TCP connection to `url`, with what it has read and whether it was closed. */
async function rawConnection(url: string): Promise<{ socket: Socket; read(): string; closed(): boolean }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let read = "";
  let closed = false;
  socket.on("data", (chunk: Buffer) => (read += chunk.toString()));
  socket.on("close", () => (closed = true));
  socket.on("error", () => undefined);
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  return { socket, read: () => read, closed: () => closed };
}

describe("health and shutdown", () => {
  const dir = builtSuiteDir("bursar-health-");

  it("/healthz answers 503 {ok:false} while the database does not answer or fails, 200 {ok:true} otherwise", async () => {
    const started = await startServer(loadConfig({ BURSAR_DATA_DIR: join(dir(), "h"), BURSAR_PORT: "0" }), { logger: false });
    const driver = started.bursar.ledger.driver as SqliteDriver;
    try {
      const healthy = await fetch(`${started.url}/healthz`);
      expect([healthy.status, await healthy.json()]).toEqual([200, { ok: true }]);

      // A write transaction that does not finish holds SQLite's one connection: the health read
      // queues behind it and gets no answer within health_timeout_ms.
      let finish!: () => void;
      const stuck = driver.transaction(() => new Promise<void>((resolve) => (finish = resolve)));
      const hanging = await fetch(`${started.url}/healthz`);
      expect(hanging.status).toBe(503);
      expect(await hanging.json()).toMatchObject({ ok: false });
      finish();
      await stuck;
      expect((await fetch(`${started.url}/healthz`)).status).toBe(200);

      // The database itself gone: the read fails at once.
      driver.db.close();
      const failing = await fetch(`${started.url}/healthz`);
      expect(failing.status).toBe(503);
      expect(await failing.json()).toMatchObject({ ok: false });
    } finally {
      await started.app.close();
    }
  });

  it("closes once a money call in flight is answered, not after its kept-alive connections time out", async () => {
    const server = await testServer();
    const agent = await server.agent("shutdown-in-flight");
    // The provider (the mounted simulator) takes a second: the close begins while the call waits on it.
    const simulator = server.started.simulator!;
    simulator.faults.set({ latency_ms: 1_000 });
    const asked_before = simulator.state.apiRequests();
    const answered = rawToolCall(server.url, agent.token, "create_order", '{"amount": 1000, "currency": "INR"}');
    // The close begins once the gate has asked the provider, and not before.
    await waitUntil("the gate to ask the provider", () => simulator.state.apiRequests() > asked_before, { interval_ms: 1 });
    // Before, the close waited for the connections' keep-alive timeout (72 s) once their answers
    // were sent: past this test's timeout.
    const closed = server.close();
    const answer = await answered;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ result: { structuredContent: { effect: "ALLOW" } } });
    await closed;
  }, 20_000);

  it("a shutdown past its grace period logs how many requests it abandoned and exits 1", async () => {
    const script = join(dir(), "slow.mjs");
    writeFileSync(
      script,
      `const { buildServer, GracefulStop, loggerOptions } = await import(${JSON.stringify(join(dist_index, "../server/app.js"))});
const app = await buildServer({
  logger: loggerOptions("info"),
  shutdown_grace_ms: 300,
  // Says when the request is in its handler (counted in flight), then never answers.
  plugins: [(app) => void app.get("/slow", () => (console.log("slow request in handler"), new Promise(() => undefined)))],
});
await app.listen({ host: "127.0.0.1", port: 0 });
new GracefulStop((line) => process.stderr.write(line + "\\n")).attach(app);
console.log("url http://127.0.0.1:" + app.server.address().port);`,
    );
    const child = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const url = await waitUntil("the server's url line", () => /url (\S+)\n/.exec(output)?.[1]);
    const slow = fetch(`${url}/slow`).catch(() => undefined);
    // The signal comes once the request is in flight (its handler has run), so it is the one abandoned.
    await waitUntil("the slow request to reach its handler", () => output.includes("slow request in handler"));
    const code = await new Promise<number | null>((resolve) => {
      child.on("exit", resolve);
      child.kill("SIGTERM");
    });
    await slow;
    expect(code).toBe(1);
    const line = output.split("\n").find((text) => text.includes("abandoning"));
    expect(JSON.parse(line as string)).toMatchObject({ abandoned: 1, grace_ms: 300 });
  });

  it("idle, silent and half-sent connections do not hold a shutdown: it exits 0 once the request in flight is answered", async () => {
    // A grace period far past the test's waits: the exit must come from the close, not the timer.
    const server = await spawnScript(join(dir(), "idle.mjs"), slowServerScript(60_000));
    // Kept alive after its answer, then idle.
    const idle = await rawConnection(server.url);
    idle.socket.write("GET /fast HTTP/1.1\r\nhost: x\r\n\r\n");
    await waitUntil("the kept-alive answer", () => idle.read().includes('{"fast":true}'));
    // Connected, nothing sent (a client's pre-opened connection).
    const silent = await rawConnection(server.url);
    // A slow client, part way through its headers: before, these two held the close until
    // Node's headers timeout (60 s), and the grace period's end made it exit 1, with 0 in flight.
    const half_sent = await rawConnection(server.url);
    half_sent.socket.write("GET /fast HTTP/1.1\r\nhost: x\r\n");
    const slow = fetch(`${server.url}/slow`);
    await waitUntil("the slow request to reach its handler", () => server.output().includes("slow request in handler"));
    server.child.kill("SIGTERM");
    await waitUntil("the shutdown to begin", () => server.output().includes("shutting down"));
    server.child.stdin.write("go\n");
    const answer = await slow;
    expect([answer.status, await answer.json()]).toEqual([200, { slow: true }]);
    expect(await within("the process to exit after the answer", server.exited, 10_000)).toBe(0);
    await waitUntil("every connection to be closed", () => idle.closed() && silent.closed() && half_sent.closed());
    expect(server.output()).not.toContain("grace period over");
  });

  it.each([
    { first: "SIGTERM", second: "SIGINT", status: 130 },
    { first: "SIGINT", second: "SIGTERM", status: 143 },
    { first: "SIGHUP", second: "SIGHUP", status: 129 },
  ] as const)("$second during a $first shutdown logs 'second signal, exiting now' and exits $status at once", async ({ first, second, status }) => {
    const server = await spawnScript(join(dir(), `second-${first}-${second}.mjs`), slowServerScript(60_000));
    const slow = fetch(`${server.url}/slow`).catch(() => undefined);
    await waitUntil("the slow request to reach its handler", () => server.output().includes("slow request in handler"));
    server.child.kill(first);
    await waitUntil("the shutdown to begin", () => server.output().includes("shutting down"));
    // Past the window within which the same signal again is taken for the first, delivered twice.
    await new Promise((resolve) => setTimeout(resolve, same_signal_window_ms + 20));
    server.child.kill(second);
    // Before, the first signal's `once` handler left Node's default: the process died of the
    // second signal (no exit code) without a word; SIGHUP killed it at the first.
    expect(await within("the process to exit", server.exited, 10_000)).toBe(status);
    await slow;
    const lines = server.output().split("\n").filter((text) => text.startsWith("{"));
    const started = lines.map((text) => JSON.parse(text) as Record<string, unknown>).find((line) => line.msg === "shutting down");
    expect(started).toMatchObject({ signal: first });
    const forced = lines.map((text) => JSON.parse(text) as Record<string, unknown>).find((line) => line.msg === "second signal, exiting now");
    expect(forced).toMatchObject({ signal: second, in_flight: 1, level: 50 });
  });
});
