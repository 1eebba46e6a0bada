// /healthz reflects the database; a shutdown waits for the requests in flight and no longer (their
// kept-alive connections do not hold it open), and one that runs out of grace says how many
// requests it abandoned.

import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import type { SqliteDriver } from "../../src/ledger/sqlite.js";
import { startServer } from "../../src/server/start.js";
import { rawToolCall, testServer } from "../support/server.js";
import { dist_index, builtSuiteDir } from "../support/build.js";
import { waitUntil } from "../support/wait.js";

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
      `const { buildServer, closeOnSignals, loggerOptions } = await import(${JSON.stringify(join(dist_index, "../server/app.js"))});
const app = await buildServer({
  logger: loggerOptions("info"),
  shutdown_grace_ms: 300,
  // Says when the request is in its handler (counted in flight), then never answers.
  plugins: [(app) => void app.get("/slow", () => (console.log("slow request in handler"), new Promise(() => undefined)))],
});
await app.listen({ host: "127.0.0.1", port: 0 });
closeOnSignals(app);
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
});
