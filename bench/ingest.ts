// bench:ingest — decision records/s ingested durably (SQLite WAL) with the signed delivery
// receipt, in deliveries of 500: over HTTP (signed webhook) and in-process. Each path first
// sends warm-up deliveries, not timed, so all measure steady state rather than the JIT. The
// paths take turns over BENCH_ROUNDS rounds (default 3) and each prints its median round and
// the range: on a shared 2-core machine one round alone has read anywhere from 15k to 23k.
//
// The HTTP sender runs in its own process, as an integrator's gateway would: it builds its
// deliveries there before timing and signs each and reads each answer (a ~136 KB receipt)
// there, so Bursar's thread does none of the sender's work. With one delivery in flight the
// sender's signing and reading still sit between Bursar's deliveries, as they would for any
// sender that waits for each receipt. It posts with node:http and a keep-alive agent: undici's
// fetch spent ~3.5 ms more CPU per delivery on these sizes, all of it in series at one in
// flight. Bursar's and the sender's CPU time per timed delivery are printed too; they do not
// depend on how the scheduler shared the cores between the two processes.

import { fork } from "node:child_process";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OperatorTokens } from "../src/datadir.js";
import { SqliteDriver } from "../src/ledger/sqlite.js";
import { createBursar } from "../src/index.js";
import { answerBytes, ingestDelivery } from "../src/ingest/ingest.js";
import { signatureHeader } from "../src/ingest/signature.js";
import { buildServer } from "../src/server/app.js";
import { evidenceSources } from "../src/server/routes/evidence-sources.js";
import { numberKnob } from "./support.js";

const deliveries = numberKnob("bench:ingest", "BENCH_DELIVERIES", 40, { min: 1, max: 10_000, whole: true });
/** Untimed deliveries first, on each path: fewer than ~10 leave the JIT visibly cold. */
const warmup_deliveries = numberKnob("bench:ingest", "BENCH_WARMUP_DELIVERIES", 10, { min: 0, max: 10_000, whole: true });
const rounds = numberKnob("bench:ingest", "BENCH_ROUNDS", 3, { min: 1, max: 100, whole: true });
const records_per_delivery = 500;
const goal_records_per_second = 20_000;
const operator_token = "bench-operator-token-0123456789";

const cpuSeconds = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1e6;

interface SendCommand {
  url: string;
  key: string;
  deliveries: number;
  warmup: number;
  in_flight: number;
}

function delivery(prefix: string): Buffer {
  const lines: string[] = [];
  for (let i = 0; i < records_per_delivery; i++) {
    lines.push(
      JSON.stringify({
        schema: "bursar.gateway-decision/1",
        event_id: `${prefix}_${i}`,
        occurred_at: "2026-10-09T14:03:11Z",
        decision: i % 7 === 0 ? "deny" : "allow",
        tool: "github/create_release",
        server: "github-mcp",
        args: { repo: "acme/api", tag: `v2.4.${i}`, notes: "release notes for the tag" },
        agent: { id: "agent-release-bot", type: "agent" },
        policy: { id: "pol_12", name: "releases need a human" },
        correlation_id: `corr-${prefix}-${i}`,
      }),
    );
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

/** The sender process: warm-up deliveries, then `deliveries` timed ones, `in_flight` at a time.
 *  It says "warm" before the timed ones, so Bursar's CPU is read over those only. */
async function sender(command: SendCommand, tag: string, warm: () => Promise<void>): Promise<SenderResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: command.in_flight });
  const post = (body: Buffer) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const headers = { "content-type": "application/x-ndjson", "content-length": body.length, "bursar-signature": signatureHeader([command.key], body, new Date()) };
      const sent = request(command.url, { method: "POST", agent, headers }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", reject);
      });
      sent.on("error", reject);
      sent.end(body);
    });
  const send = async (body: Buffer) => {
    const { status, text } = await post(body);
    const answer = JSON.parse(text) as { written: number; receipt: { records: unknown[] } };
    if (status !== 200 || answer.written !== records_per_delivery || answer.receipt.records.length !== records_per_delivery) {
      throw new Error(`delivery failed: ${status} ${text.slice(0, 200)}`);
    }
  };
  for (let d = 0; d < command.warmup; d++) await send(delivery(`${tag}_warmup_${d}`));
  const bodies = Array.from({ length: command.deliveries }, (_, d) => delivery(`${tag}_${d}`));
  await warm();
  let next = 0;
  const started = process.hrtime.bigint();
  const cpu_before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: command.in_flight }, async () => {
      while (next < bodies.length) await send(bodies[next++]!);
    }),
  );
  const result = { seconds: Number(process.hrtime.bigint() - started) / 1e9, cpu_ms: (cpuSeconds(process.cpuUsage(cpu_before)) * 1000) / bodies.length };
  agent.destroy();
  return result;
}

interface SenderResult {
  seconds: number;
  /** The sender's own CPU time per timed delivery: signing, sending, reading the receipt. */
  cpu_ms: number;
}

interface Measured {
  rate: number;
  seconds: number;
  /** Bursar's CPU per timed delivery. */
  cpu_ms: number;
  sender_cpu_ms?: number;
}

/** The round with the median rate (the lower middle one for an even count). */
function median(runs: readonly Measured[]): Measured {
  const sorted = [...runs].sort((a, b) => a.rate - b.rate);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

type SenderMessage = { warm: true } | SenderResult | { error: string };

/** Runs one sender; `onWarm` runs when its warm-up deliveries are done. Rejects if it dies without an answer. */
async function runSender(command: SendCommand, tag: string, onWarm: () => void): Promise<SenderResult> {
  const child = fork(import.meta.filename, ["--sender", tag], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = once(child, "exit");
  return new Promise<SenderResult>((resolve, reject) => {
    child.on("message", (message: SenderMessage) => {
      if ("warm" in message) {
        onWarm();
        child.send({ go: true });
      } else if ("seconds" in message) resolve(message);
      else reject(new Error(`sender failed: ${message.error}`));
    });
    void exited.then(([code]) => reject(new Error(`the sender exited (${String(code)}) without an answer`)));
    child.send(command);
  }).finally(() => exited);
}

/**
 * The yardstick: a bare Node http server that reads each delivery and answers with the stored
 * bytes of a real answer (same size, same receipt), doing nothing else. What the sender reaches
 * against it is what this machine's HTTP exchange alone allows at one delivery in flight.
 */
async function bareServer(answer: Buffer): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((incoming, response) => {
    incoming.on("data", () => undefined);
    incoming.on("end", () => {
      response.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": answer.length });
      response.end(answer);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/ingest`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-ingest-"));
  try {
    const bursar = await createBursar({ db: join(dir, "bursar.db") });
    const access = { operator: OperatorTokens.fromToken(operator_token), ledger: bursar.ledger };
    const evidence = evidenceSources({ access, bursar, master_key: "bench-master-key-0123456789" });
    const app = await buildServer({ logger: false, plugins: evidence.plugins, onClose: () => bursar.close() });
    try {
      const base = await app.listen({ host: "127.0.0.1", port: 0 });
      const { source, secrets } = await evidence.sources.create({ kind: "decisions", name: "bench" });
      const command = { url: `${base}/ingest/${source.id}`, key: (secrets as { signing_key: string }).signing_key, deliveries, warmup: warmup_deliveries };

      const http = async (in_flight: number, tag: string) => {
        let cpu_before = process.cpuUsage();
        const sent = await runSender({ ...command, in_flight }, tag, () => (cpu_before = process.cpuUsage()));
        const cpu_ms = (cpuSeconds(process.cpuUsage(cpu_before)) * 1000) / deliveries;
        return { rate: (deliveries * records_per_delivery) / sent.seconds, seconds: sent.seconds, cpu_ms, sender_cpu_ms: sent.cpu_ms };
      };
      // The shared ingest code is warmed in-process first, so no path is measured colder than another.
      const local = (body: Buffer) => ingestDelivery({ driver: bursar.driver, log: bursar.log, clock: () => new Date() }, source.id, body);
      let stored_answer: Buffer = Buffer.alloc(0);
      for (let d = 0; d < warmup_deliveries; d++) stored_answer = answerBytes(await local(delivery(`lib_warmup_${d}`)));
      const bare = await bareServer(stored_answer);
      const yardstick = await runSender({ ...command, url: bare.url, in_flight: 1 }, "bare", () => undefined).finally(() => bare.close());
      const lib = async (tag: string) => {
        const bodies = Array.from({ length: deliveries }, (_, d) => delivery(`${tag}_${d}`));
        const started = process.hrtime.bigint();
        const cpu_before = process.cpuUsage();
        for (const body of bodies) await local(body);
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        return { rate: (deliveries * records_per_delivery) / seconds, seconds, cpu_ms: (cpuSeconds(process.cpuUsage(cpu_before)) * 1000) / deliveries };
      };
      // The paths take turns, so a slow spell of the machine falls on all of them alike.
      const measured: Record<"one" | "two" | "lib", Measured[]> = { one: [], two: [], lib: [] };
      for (let round = 0; round < rounds; round++) {
        measured.one.push(await http(1, `http1_r${round}`));
        measured.two.push(await http(2, `http2_r${round}`));
        measured.lib.push(await lib(`lib_r${round}`));
      }
      const synchronous = bursar.driver instanceof SqliteDriver ? ["OFF", "NORMAL", "FULL", "EXTRA"][Number(bursar.driver.db.pragma("synchronous", { simple: true }))] : "n/a";
      const rate = (value: number) => Math.round(value).toLocaleString("en").padStart(7);
      console.log(
        `bench:ingest  ${deliveries} deliveries x ${records_per_delivery} records per path and round, ${rounds} rounds taking turns (after ${warmup_deliveries} warm-up deliveries each), SQLite WAL (synchronous=${synchronous}), answered once durable, one transaction + one signed receipt per delivery; the HTTP sender is its own process; each path's median round, and its rounds' range`,
      );
      const line = (label: string, runs: Measured[]) => {
        const m = median(runs);
        const range = `${rate(Math.min(...runs.map((r) => r.rate))).trim()}-${rate(Math.max(...runs.map((r) => r.rate))).trim()}`;
        console.log(
          `  ${label}: ${rate(m.rate)} records/s (rounds ${range}; ${((m.seconds * 1000) / deliveries).toFixed(1)} ms per delivery; Bursar CPU ${m.cpu_ms.toFixed(1)} ms per delivery` +
            `${m.sender_cpu_ms === undefined ? "" : `, sender CPU ${m.sender_cpu_ms.toFixed(1)} ms`})`,
        );
        return m;
      };
      const one = line("HTTP webhook (signed, NDJSON), 1 delivery in flight ", measured.one);
      line("HTTP webhook (signed, NDJSON), 2 deliveries in flight", measured.two);
      line("in-process ingestDelivery(), 1 at a time            ", measured.lib);
      const bare_rate = (deliveries * records_per_delivery) / yardstick.seconds;
      console.log(
        `  yardstick, a bare Node http server answering stored receipt bytes, 1 in flight: ${rate(bare_rate)} records/s ` +
          `(${((yardstick.seconds * 1000) / deliveries).toFixed(1)} ms per exchange, sender CPU ${yardstick.cpu_ms.toFixed(1)} ms); Bursar over HTTP reaches ${(one.rate / bare_rate).toFixed(2)} of it`,
      );
      const met = one.rate >= goal_records_per_second;
      console.log(`  goal ${goal_records_per_second.toLocaleString("en")} records/s over HTTP, 1 delivery in flight (median round): ${met ? "met" : "NOT met"} (ratio ${(one.rate / goal_records_per_second).toFixed(2)})`);
    } finally {
      await app.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--sender") {
  const [command] = (await once(process, "message")) as [SendCommand];
  const warm = async () => {
    const go = once(process, "message");
    process.send!({ warm: true });
    await go;
  };
  try {
    process.send!(await sender(command, process.argv[3]!, warm));
  } catch (error) {
    process.send!({ error: (error as Error).message });
  }
  process.disconnect();
} else {
  await main();
}
