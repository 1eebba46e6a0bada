// bench:gate — create_order from the MCP SDK client through Bursar beside a bare MCP server (same
// SDK, same fastify assembly, same simulator over loopback HTTP; no policy, ledger or log).
// Prints added p50/p99 latency and the throughput ratio at 1 and 16 concurrent clients, a
// yardstick of the bare server plus Bursar's evidence log alone, and where Bursar's time goes by
// its own /metrics (ledger steps and provider call).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { generateKeyPairSync } from "node:crypto";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance as node_performance } from "node:perf_hooks";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { FastifyInstance } from "fastify";
import { loadConfig } from "../src/config.js";
import { systemClock } from "../src/clock.js";
import { randomSecret } from "../src/datadir.js";
import { createLogSigner, EvidenceLog } from "../src/evidence/index.js";
import { openDriver } from "../src/index.js";
import { migrations, type SqlDriver } from "../src/ledger/index.js";
import { fdatasyncAsync } from "../src/ledger/sqlite-wal.js";
import { tool_declarations } from "../src/gate/tools.js";
import type { Provider } from "../src/provider/port.js";
import { createRazorpayProvider } from "../src/provider/razorpay/index.js";
import { acceptOnlyKey, createSimulator } from "../src/provider/simulator/index.js";
import { buildServer } from "../src/server/app.js";
import { answerStateless, json_schema_validator } from "../src/server/mcp.js";
import { maintenance_interval_ms, startServer } from "../src/server/start.js";
import { choiceKnob, numberKnob, unbounded_block } from "./support.js";

const measure_seconds = numberKnob("bench:gate", "BENCH_SECONDS", 3, { min: 0, above_min: true, max: 20, whole: false });
const slices_per_configuration = numberKnob("bench:gate", "BENCH_SLICES", 3, { min: 1, max: 10, whole: true });
const warmup_calls = numberKnob("bench:gate", "BENCH_WARMUP_CALLS", 300, { min: 0, max: 10_000, whole: true });
const concurrency_levels = [1, 16] as const;
/** A slice also stops at this many calls, whatever the clock says. */
const calls_per_slice_max = 200_000;
const call_timeout_ms = 10_000;
const worker_start_timeout_ms = 30_000;
const worker_close_timeout_ms = 10_000;
const order_amount_minor = 1_000;
const goal_added_p50_ms = 1;
const goal_throughput_ratio = 0.8;
const operator_token = "bench-operator-token-0123456789";
const interactive = Boolean(process.stdout.isTTY) && !process.env.CI;
/** "worker" (default): each server on its own thread, like a separate process; "inline": all on one thread. */
const placement = choiceKnob("bench:gate", "BENCH_SERVERS", ["worker", "inline"]);

/**
 * bare: no policy, ledger or log. log: the bare server plus Bursar's evidence log alone, as
 * much of the log as the design asks of every create_order (a signed decision entry durable
 * before the provider is called, a signed settlement entry after), with no policy or ledger: a
 * yardstick for how much of Bursar's cost is the log and its storage.
 */
type Role = "bursar" | "log" | "bare";
const roles: readonly Role[] = ["bare", "log", "bursar"];

interface Ready {
  url: string;
  /** Bearer token for /mcp (Bursar's agent token; the bare server ignores it). */
  token: string;
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`bench:gate: ${message}`);
}

// ---------------------------------------------------------------- servers (a worker thread each, or inline)

async function operatorCall<T>(url: string, path: string, body: unknown): Promise<T> {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${operator_token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  assert(response.status === 201 || response.status === 200, `${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** A real `bursar serve` (simulator mounted at /simulator), one agent and a block nothing exceeds. */
async function startBursar(): Promise<{ ready: Ready; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-gate-"));
  const config = loadConfig({ BURSAR_DATA_DIR: dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: operator_token });
  const started = await startServer(config, { logger: false });
  const agent = await operatorCall<{ agent_id: string; token: string }>(started.url, "/api/v1/agents", { name: "bench" });
  await operatorCall(started.url, "/api/v1/blocks", {
    ...unbounded_block,
    agent_id: agent.agent_id,
  });
  const close = async () => {
    await started.app.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { ready: { url: started.url, token: agent.token }, close };
}

/** The bare server's one tool: forward to the provider, answer with the order. Nothing else. */
function bareMcpServer(provider: Provider, receipt_counter: { next: number }): Server {
  // The same shared validator as the gate's servers: the comparison is the policy, ledger and log.
  const server = new Server({ name: "bare", version: "0.0.0" }, { capabilities: { tools: {} }, jsonSchemaValidator: json_schema_validator });
  const create_order = tool_declarations.find((tool) => tool.name === "create_order");
  assert(create_order, "Bursar declares create_order");
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [create_order] }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = (request.params.arguments ?? {}) as { amount?: unknown; currency?: unknown };
    const outcome = await provider.createOrder({
      amount: Number(args.amount),
      currency: String(args.currency).toUpperCase(),
      receipt: `bare_${receipt_counter.next++}`,
    });
    if (outcome.kind !== "ok") {
      return { isError: true, content: [{ type: "text", text: JSON.stringify(outcome) }], structuredContent: { outcome } };
    }
    const order = outcome.value;
    return { content: [{ type: "text", text: `order ${order.id} created` }], structuredContent: { order } };
  });
  return server;
}

/**
 * The log yardstick's provider: before each order a signed decision entry, durable before the
 * order is asked for; after it a signed settlement entry, committed without waiting for its flush
 * (as Bursar's second phase is). The entries are shaped and sized as Bursar's own for the call.
 */
function loggedProvider(provider: Provider, driver: SqlDriver, log: EvidenceLog): Provider {
  let next = 0;
  const createOrder: Provider["createOrder"] = async (input) => {
    const call = next++;
    const agent_id = "agt_benchLogYardstk";
    const reservation_id = `res_bench${String(call).padStart(11, "0")}`;
    await driver.transaction((tx) =>
      log.append(tx, {
        kind: "gate.decision",
        source: "gate",
        body: {
          agent_id,
          approval_id: null,
          args: { amount: input.amount, currency: input.currency, idempotency_key: `bench_${call}` },
          block_id: "blk_benchLogYardstk",
          key: { derived: false, params_hash: "0".repeat(64) },
          payment: null,
          reservation_id,
          tool: "create_order",
          verdict: { effect: "ALLOW", reason: "every rule passed", rule: "ALLOW" },
        },
      }),
    );
    const outcome = await provider.createOrder({ ...input, receipt: reservation_id });
    const order = outcome.kind === "ok" ? outcome.value : null;
    await driver.transaction(
      (tx) => log.append(tx, { kind: "gate.settlement", source: "gate", body: { action: `order.${outcome.kind}`, agent_id, approval_id: null, order, reservation_id } }),
      { async_commit: true },
    );
    return outcome;
  };
  return { ...provider, createOrder };
}

/** Mirrors Bursar's /mcp route (src/server/mcp.ts) minus authentication and the gate. */
function bareMcpRoute(app: FastifyInstance, provider: () => Provider): void {
  const receipt_counter = { next: 0 };
  app.post("/mcp", async (request, reply) => answerStateless(bareMcpServer(provider(), receipt_counter), request, reply));
}

/** The evidence log the log yardstick writes: Bursar's own, on the driver Bursar opens for a
 *  SQLite file (WAL, group commit, flushes off the event loop), in a fresh directory. */
async function openYardstickLog(): Promise<{ driver: SqlDriver; log: EvidenceLog; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-gate-log-"));
  const driver = openDriver(join(dir, "bursar.db"));
  await driver.migrate(migrations);
  const origin = "bench.local/log";
  const log = await EvidenceLog.open(driver, { signer: createLogSigner(generateKeyPairSync("ed25519").privateKey, origin), origin, clock: systemClock });
  // Checkpoints as Bursar's maintenance timer cuts them.
  const timer = setInterval(() => void log.tick().catch(() => undefined), maintenance_interval_ms);
  const close = async () => {
    clearInterval(timer);
    await driver.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { driver, log, close };
}

/** The same fastify assembly and the same simulator mount as Bursar, with a bare /mcp (whose
 *  orders, for the log yardstick, are logged first). */
async function startBare(logged = false): Promise<{ ready: Ready; close: () => Promise<void> }> {
  const webhook_secret = randomSecret();
  const key_secret = randomSecret();
  const simulator = createSimulator({ webhook_secret, control_routes: false, accept_key: acceptOnlyKey("rzp_test_benchbare", key_secret) });
  let provider: Provider | undefined;
  const app = await buildServer({
    logger: false,
    plugins: [
      (app) => bareMcpRoute(app, () => provider as Provider),
      async (app) => void (await app.register(simulator.plugin, { prefix: "/simulator" })),
    ],
    onClose: () => simulator.close(),
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  assert(typeof address === "object" && address, "the bare server has no address");
  const url = `http://127.0.0.1:${address.port}`;
  provider = createRazorpayProvider({ key_id: "rzp_test_benchbare", key_secret, base_url: `${url}/simulator`, webhook_secret });
  if (!logged) return { ready: { url, token: "unused" }, close: () => app.close() };
  const yardstick = await openYardstickLog();
  provider = loggedProvider(provider, yardstick.driver, yardstick.log);
  const close = async () => {
    await app.close();
    await yardstick.close();
  };
  return { ready: { url, token: "unused" }, close };
}

function startRole(role: Role): Promise<{ ready: Ready; close: () => Promise<void> }> {
  return role === "bursar" ? startBursar() : startBare(role === "log");
}

async function serverWorker(role: Role): Promise<void> {
  const port = parentPort;
  assert(port, "serverWorker runs only in a worker thread");
  const { ready, close } = await startRole(role);
  port.on("message", (message: unknown) => {
    // The server thread's busy time so far: the bench reads it around each slice.
    if (message === "busy") return port.postMessage({ busy_ms: node_performance.eventLoopUtilization().active });
    if (message !== "close") return;
    close().then(
      () => port.postMessage({ closed: true }),
      (error: unknown) => port.postMessage({ closed: false, error: String(error) }),
    );
  });
  port.postMessage({ ready });
}

// ---------------------------------------------------------------- clients (main thread)

interface RunningServer {
  role: Role;
  ready: Ready;
  stop: () => Promise<void>;
  /** Milliseconds the server's thread has been busy since it started (its event loop's active
   *  time); only for a server on a thread of its own. */
  busyMs?: () => Promise<number>;
}

function withTimeout<T>(promise: Promise<T>, timeout_ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`bench:gate: ${what} took longer than ${timeout_ms} ms`)), timeout_ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function spawnWorker(role: Role): Promise<RunningServer> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { role } });
  const ready = new Promise<Ready>((resolve, reject) => {
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`the ${role} server exited with ${code} before it was ready`)));
    worker.once("message", (message: { ready: Ready }) => resolve(message.ready));
  });
  const busyMs = () =>
    withTimeout(
      new Promise<number>((resolve) => {
        worker.once("message", (message: { busy_ms: number }) => resolve(message.busy_ms));
        worker.postMessage("busy");
      }),
      worker_close_timeout_ms,
      `reading the ${role} server's busy time`,
    );
  const stop = async () => {
    const closed = new Promise<void>((resolve) => worker.once("message", () => resolve()));
    worker.postMessage("close");
    await withTimeout(closed, worker_close_timeout_ms, `closing the ${role} server`).catch(() => undefined);
    await worker.terminate();
  };
  return { role, ready: await withTimeout(ready, worker_start_timeout_ms, `starting the ${role} server`), stop, busyMs };
}

async function spawnServer(role: Role): Promise<RunningServer> {
  if (placement === "worker") return spawnWorker(role);
  const { ready, close } = await startRole(role);
  return { role, ready, stop: close };
}

/** One SDK client per simulated agent: its own Client and transport (initialize handshake done). */
async function connectClients(server: RunningServer, count: number): Promise<Client[]> {
  const clients: Client[] = [];
  for (let index = 0; index < count; index++) {
    const client = new Client({ name: `bench-${server.role}-${index}`, version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.ready.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${server.ready.token}` } },
      // Without the transport's one long-lived signal: undici puts a listener on it for every
      // request and takes it off only at GC, so past ~1,500 calls between collections (a slice
      // longer than the default) each call printed a MaxListenersExceededWarning. The bench
      // closes its clients only after their calls have ended.
      fetch: (url, init) => fetch(url, { ...init, signal: undefined }),
    });
    await client.connect(transport);
    clients.push(client);
  }
  return clients;
}

let key_counter = 0;

/** One create_order with a key never used before, so nothing replays; its latency in ms. */
async function createOrderCall(client: Client): Promise<number> {
  const key = `bench_${process.pid}_${key_counter++}`;
  const start = performance.now();
  const result = await client.callTool(
    { name: "create_order", arguments: { amount: order_amount_minor, currency: "INR", idempotency_key: key } },
    undefined,
    { timeout: call_timeout_ms },
  );
  const elapsed_ms = performance.now() - start;
  const order = (result.structuredContent as { order?: { id?: unknown } } | undefined)?.order;
  assert(!result.isError && typeof order?.id === "string", `create_order was not allowed: ${JSON.stringify(result.structuredContent)}`);
  return elapsed_ms;
}

interface Slice {
  latencies_ms: number[];
  calls: number;
  elapsed_ms: number;
}

/** Every client calls in a closed loop until the deadline (or the call cap); none overlaps itself. */
async function runSlice(clients: readonly Client[], duration_ms: number, calls_max: number): Promise<Slice> {
  const latencies_ms: number[] = [];
  const start = performance.now();
  const deadline = start + duration_ms;
  let started = 0;
  const loop = async (client: Client) => {
    while (performance.now() < deadline && started < calls_max) {
      started++;
      latencies_ms.push(await createOrderCall(client));
    }
  };
  await Promise.all(clients.map(loop));
  return { latencies_ms, calls: latencies_ms.length, elapsed_ms: performance.now() - start };
}

// ---------------------------------------------------------------- measuring and reporting

/** WAL frames one create_order's first phase (decision, hold, evidence) commits: about 15 of the call's 22, measured. */
const hold_frames = 15;
const wal_frame_bytes = 24 + 4096;
const flush_samples = 200;

/**
 * The floor under the added latency: the first phase's frames must be on disk before the
 * provider is called. Writes hold_frames WAL-shaped frames (a 24-byte header and a 4 KiB page
 * each, so unaligned, as SQLite writes them) over a preallocated file in the bench's temporary
 * directory and flushes them with the driver's own flush (fdatasync on libuv's thread pool).
 */
async function walFlushFloor(): Promise<{ p50_ms: number; p99_ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-flush-"));
  const fd = openSync(join(dir, "frames"), "w");
  try {
    const batch = Buffer.alloc(hold_frames * wal_frame_bytes, 7);
    for (let sample = 0; sample < flush_samples; sample++) writeSync(fd, batch, 0, batch.length, sample * batch.length);
    await fdatasyncAsync(fd);
    const header = Buffer.alloc(24, 1);
    const page = Buffer.alloc(4096, 2);
    const times: number[] = [];
    for (let sample = 0; sample < flush_samples; sample++) {
      let at = sample * batch.length;
      for (let frame = 0; frame < hold_frames; frame++, at += wal_frame_bytes) {
        writeSync(fd, header, 0, header.length, at);
        writeSync(fd, page, 0, page.length, at + header.length);
      }
      const start = performance.now();
      await fdatasyncAsync(fd);
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    return { p50_ms: percentile(times, 0.5), p99_ms: percentile(times, 0.99) };
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Measured {
  role: Role;
  concurrency: number;
  latencies_ms: number[];
  calls: number;
  elapsed_ms: number;
  slice_rates: number[];
  /** The server thread's busy time during the slices (NaN when the server shares the clients' thread). */
  server_busy_ms: number;
  /** Bursar only: its /metrics histograms' sums and counts over the slices. */
  steps?: StepTotals;
}

// ---------------------------------------------------------------- where Bursar's time goes (its /metrics)

/** The histograms of Bursar's /metrics that split a create_order: its two ledger steps and the
 *  provider call, and the WAL flushes (a decision waits for one; each may cover several calls). */
const step_series = {
  decide: 'bursar_ledger_step_seconds_{part}{tool="create_order",step="decide"}',
  provider: 'bursar_provider_request_seconds_{part}{operation="create_order",outcome="ok"}',
  complete: 'bursar_ledger_step_seconds_{part}{tool="create_order",step="complete"}',
  flush: "bursar_sqlite_wal_flush_seconds_{part}",
} as const;
type Step = keyof typeof step_series;
type StepTotals = Record<Step, { seconds: number; count: number }>;

async function stepTotals(url: string): Promise<StepTotals> {
  const response = await fetch(`${url}/metrics`);
  const text = await response.text();
  assert(response.ok, `GET /metrics answered ${response.status}`);
  const value = (series: string) => {
    const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
    assert(line !== undefined, `/metrics has no ${series}`);
    return Number(line.slice(series.length + 1));
  };
  const totals = {} as StepTotals;
  for (const [step, series] of Object.entries(step_series) as Array<[Step, string]>) {
    totals[step] = { seconds: value(series.replace("{part}", "sum")), count: value(series.replace("{part}", "count")) };
  }
  return totals;
}

function stepsBetween(before: StepTotals, after: StepTotals): StepTotals {
  const between = {} as StepTotals;
  for (const step of Object.keys(step_series) as Step[]) {
    between[step] = { seconds: after[step].seconds - before[step].seconds, count: after[step].count - before[step].count };
  }
  return between;
}

function percentile(sorted: readonly number[], fraction: number): number {
  assert(sorted.length > 0, "no samples");
  const index = Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1);
  return sorted[Math.max(0, index)] as number;
}

function summary(measured: Measured) {
  const sorted = [...measured.latencies_ms].sort((a, b) => a - b);
  return {
    p50_ms: percentile(sorted, 0.5),
    p99_ms: percentile(sorted, 0.99),
    calls_per_second: measured.calls / (measured.elapsed_ms / 1000),
  };
}

function progress(text: string): void {
  if (interactive) process.stdout.write(`\r${text.padEnd(72)}`);
}

/** Both servers at one concurrency: warm-up, then slices alternating which server goes first. */
async function measureConcurrency(servers: readonly RunningServer[], concurrency: number): Promise<Measured[]> {
  const clients = new Map<Role, Client[]>();
  const results = new Map<Role, Measured>();
  for (const server of servers) {
    const connected = await connectClients(server, concurrency);
    clients.set(server.role, connected);
    progress(`warming up ${server.role}, ${concurrency} client(s)`);
    await runSlice(connected, Number.POSITIVE_INFINITY, warmup_calls);
    results.set(server.role, { role: server.role, concurrency, latencies_ms: [], calls: 0, elapsed_ms: 0, slice_rates: [], server_busy_ms: server.busyMs ? 0 : Number.NaN });
  }
  const bursar = servers.find((server) => server.role === "bursar") as RunningServer;
  const steps_before = await stepTotals(bursar.ready.url);
  const slice_ms = (measure_seconds * 1000) / slices_per_configuration;
  for (let slice = 0; slice < slices_per_configuration; slice++) {
    const order = slice % 2 === 0 ? servers : [...servers].reverse();
    for (const server of order) {
      progress(`measuring ${server.role}, ${concurrency} client(s), slice ${slice + 1}/${slices_per_configuration}`);
      const busy_before = await server.busyMs?.();
      const result = await runSlice(clients.get(server.role) as Client[], slice_ms, calls_per_slice_max);
      const busy_after = await server.busyMs?.();
      const measured = results.get(server.role) as Measured;
      if (busy_before !== undefined && busy_after !== undefined) measured.server_busy_ms += busy_after - busy_before;
      for (const latency_ms of result.latencies_ms) measured.latencies_ms.push(latency_ms);
      measured.calls += result.calls;
      measured.elapsed_ms += result.elapsed_ms;
      measured.slice_rates.push(result.calls / (result.elapsed_ms / 1000));
    }
  }
  (results.get("bursar") as Measured).steps = stepsBetween(steps_before, await stepTotals(bursar.ready.url));
  for (const list of clients.values()) for (const client of list) await client.close();
  return roles.map((role) => results.get(role) as Measured);
}

const fixed = (value: number, digits: number, width: number) => value.toFixed(digits).padStart(width);
const signed = (value: number, digits: number, width: number) => `${value >= 0 ? "+" : ""}${value.toFixed(digits)}`.padStart(width);

function printMeasured(all: readonly Measured[]): void {
  console.log("clients  server     calls   p50 ms   p99 ms    calls/s   slices calls/s (min-max)");
  for (const measured of all) {
    const { p50_ms, p99_ms, calls_per_second } = summary(measured);
    const low = Math.min(...measured.slice_rates);
    const high = Math.max(...measured.slice_rates);
    console.log(
      `${String(measured.concurrency).padStart(7)}  ${measured.role.padEnd(7)} ${String(measured.calls).padStart(8)} ` +
        `${fixed(p50_ms, 2, 8)} ${fixed(p99_ms, 2, 8)} ${fixed(calls_per_second, 0, 10)}   ${low.toFixed(0)}-${high.toFixed(0)}`,
    );
  }
}

function printComparison(all: readonly Measured[]): void {
  const verdict = (met: boolean) => (met ? "met" : "NOT met");
  console.log("");
  const goal_p50 = `goal < ${goal_added_p50_ms} ms`.padEnd(11);
  console.log(`clients   added p50 ms   ${goal_p50}   added p99 ms   throughput bursar/bare   goal >= ${goal_throughput_ratio}x`);
  for (const concurrency of concurrency_levels) {
    const bare = summary(all.find((m) => m.role === "bare" && m.concurrency === concurrency) as Measured);
    const bursar = summary(all.find((m) => m.role === "bursar" && m.concurrency === concurrency) as Measured);
    const added_p50_ms = bursar.p50_ms - bare.p50_ms;
    const ratio = bursar.calls_per_second / bare.calls_per_second;
    console.log(
      `${String(concurrency).padStart(7)}   ${signed(added_p50_ms, 2, 12)}   ${verdict(added_p50_ms < goal_added_p50_ms).padEnd(11)}   ` +
        `${signed(bursar.p99_ms - bare.p99_ms, 2, 12)}   ${`${ratio.toFixed(3)}x`.padStart(22)}   ${verdict(ratio >= goal_throughput_ratio)}`,
    );
  }
  console.log("");
  console.log("yardstick: the bare server plus Bursar's evidence log alone (a signed decision entry durable before the order, a signed settlement entry after)");
  console.log("clients   added p50 ms   added p99 ms   throughput log/bare   bursar/log");
  for (const concurrency of concurrency_levels) {
    const of = (role: Role) => summary(all.find((m) => m.role === role && m.concurrency === concurrency) as Measured);
    const [bare, log, bursar] = [of("bare"), of("log"), of("bursar")];
    console.log(
      `${String(concurrency).padStart(7)}   ${signed(log.p50_ms - bare.p50_ms, 2, 12)}   ${signed(log.p99_ms - bare.p99_ms, 2, 12)}   ` +
        `${`${(log.calls_per_second / bare.calls_per_second).toFixed(3)}x`.padStart(19)}   ${`${(bursar.calls_per_second / log.calls_per_second).toFixed(3)}x`.padStart(10)}`,
    );
  }
}

/**
 * Where the throughput goes: each server's thread time per call. Once a server's thread is busy
 * nearly all the time, its calls/s is 1 / (its busy time per call), so at 16 clients the ratio
 * follows from the bare server's busy time per call over Bursar's.
 */
function printServerThreads(all: readonly Measured[]): void {
  if (all.some((measured) => Number.isNaN(measured.server_busy_ms))) return;
  console.log("");
  console.log("server threads (event loop active time): busy per call, and busy share of the slices");
  console.log("clients   bare µs/call   log µs/call   bursar µs/call   busy bare / log / bursar   bare/bursar per call");
  for (const concurrency of concurrency_levels) {
    const of = (role: Role) => all.find((m) => m.role === role && m.concurrency === concurrency) as Measured;
    const per_call_us = (measured: Measured) => (measured.server_busy_ms * 1000) / measured.calls;
    const share = (measured: Measured) => `${((100 * measured.server_busy_ms) / measured.elapsed_ms).toFixed(0)}%`;
    const [bare, log, bursar] = [of("bare"), of("log"), of("bursar")];
    console.log(
      `${String(concurrency).padStart(7)}   ${fixed(per_call_us(bare), 0, 12)}   ${fixed(per_call_us(log), 0, 11)}   ${fixed(per_call_us(bursar), 0, 14)}   ` +
        `${`${share(bare)} / ${share(log)} / ${share(bursar)}`.padStart(24)}   ${fixed(per_call_us(bare) / per_call_us(bursar), 3, 20)}`,
    );
  }
}

/**
 * Bursar's create_order split by its own /metrics: the decision with its hold (flush included),
 * the provider call and the completion (an order's does not wait for its flush), as mean ms per
 * call over the slices, beside the mean latency the clients saw. The rest is the MCP, HTTP and
 * gate work around them, and queueing. Last, the WAL flushes: mean ms each (the disk's share of
 * a decision) and how many per call (fewer than one when calls share them).
 */
function printSteps(all: readonly Measured[]): void {
  console.log("");
  console.log("bursar's create_order by its /metrics (mean ms per call over the slices; decide includes its flush wait, complete has none)");
  console.log("clients      decide   provider   complete   all three   whole call   the rest (MCP, HTTP, gate, queueing)   flush ms   flushes/call");
  for (const measured of all.filter((m) => m.role === "bursar")) {
    const steps = measured.steps as StepTotals;
    const mean = (step: Step) => (steps[step].count > 0 ? (1000 * steps[step].seconds) / steps[step].count : Number.NaN);
    const three = mean("decide") + mean("provider") + mean("complete");
    const whole = measured.latencies_ms.reduce((sum, latency) => sum + latency, 0) / measured.latencies_ms.length;
    console.log(
      `${String(measured.concurrency).padStart(7)}   ${fixed(mean("decide"), 2, 9)}  ${fixed(mean("provider"), 2, 9)}  ${fixed(mean("complete"), 2, 9)}` +
        `  ${fixed(three, 2, 10)}   ${fixed(whole, 2, 10)}   ${fixed(whole - three, 2, 10)}` +
        `${" ".repeat(28)}${fixed(mean("flush"), 2, 9)}   ${fixed(steps.flush.count / steps.decide.count, 2, 12)}`,
    );
  }
}

async function main(): Promise<void> {
  const load_before = loadavg()[0] ?? 0;
  const servers: RunningServer[] = [];
  try {
    for (const role of roles) servers.push(await spawnServer(role));
    const all: Measured[] = [];
    for (const concurrency of concurrency_levels) all.push(...(await measureConcurrency(servers, concurrency)));
    if (interactive) process.stdout.write(`\r${" ".repeat(72)}\r`);
    console.log("bench:gate — create_order via the MCP SDK client (Streamable HTTP, stateless, JSON responses), loopback");
    console.log(`  bursar: startServer + simulator at /simulator, SQLite WAL (fdatasync before any answer), data dir under ${tmpdir()}`);
    console.log("  bare:   same SDK Server per request + same fastify assembly + same simulator via the razorpay client; no policy, ledger or log");
    console.log("  log:    bare + Bursar's evidence log on its SQLite driver: two signed entries per order, the first durable before the order; no policy or ledger");
    console.log(
      `  ${measure_seconds} s per configuration in ${slices_per_configuration} alternating slices after ${warmup_calls} warm-up calls; ` +
        `${placement === "worker" ? "servers in worker threads, clients on the main thread" : "servers and clients on one thread"}; ${availableParallelism()} CPUs, load average ${load_before.toFixed(2)} at start`,
    );
    console.log("");
    printMeasured(all);
    printComparison(all);
    printServerThreads(all);
    printSteps(all);
    const floor = await walFlushFloor();
    console.log("");
    console.log(
      `floor: fdatasync of one hold's ${hold_frames} WAL frames in ${tmpdir()}, before the provider is called: ` +
        `p50 ${floor.p50_ms.toFixed(2)} ms, p99 ${floor.p99_ms.toFixed(2)} ms (${flush_samples} samples, thread pool)`,
    );
  } finally {
    for (const server of servers) await server.stop();
  }
}

if (isMainThread) await main();
else await serverWorker((workerData as { role: Role }).role);
