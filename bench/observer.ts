// bench:observer — the chained observer's cost: tools/call throughput and latency (p50/p99)
// through Bursar's observer versus straight to the same SDK MCP server, and the SSE
// time-to-first-byte difference. Loopback only; bounded by BENCH_CALLS.
//
// Latency is measured twice: under the throughput load (where it includes queueing behind the
// other calls in flight) and one call at a time (what the hop itself adds to a call).
//
// A bare Node http relay (no tap, no evidence) runs in the observer's process as a yardstick:
// its ratio is what any relay written on Node's http module costs on this machine.
//
// Three processes, as deployed: the client (standing in for the gateway), Bursar with its
// observer (this process), and the upstream MCP server. The same client process drives both
// sides with the same code path, alternating direct and observed runs in rounds so that load
// from elsewhere on the machine falls on both. Each process's CPU time per call is printed
// too: on a machine with fewer cores than processes they compete, and that number shows the
// observer's own cost independently of how the scheduler shared the cores.

import { fork, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { OperatorTokens } from "../src/datadir.js";
import { createBursar } from "../src/index.js";
import { buildServer } from "../src/server/app.js";
import { evidenceSources } from "../src/server/routes/evidence-sources.js";
import type { ClientAnswer, ClientCommand } from "./observer-client.js";
import { numberKnob } from "./support.js";

const calls = numberKnob("bench:observer", "BENCH_CALLS", 3000, { min: 1, max: 1_000_000, whole: true });
const concurrency = numberKnob("bench:observer", "BENCH_CONCURRENCY", 8, { min: 1, max: 256, whole: true });
const ttfb_samples = numberKnob("bench:observer", "BENCH_TTFB_SAMPLES", 300, { min: 1, max: 100_000, whole: true });
const rounds = numberKnob("bench:observer", "BENCH_ROUNDS", 3, { min: 1, max: 100, whole: true });
/** Calls per side made one at a time: the added latency of a call that does not queue. */
const unloaded_calls = numberKnob("bench:observer", "BENCH_UNLOADED_CALLS", 600, { min: 1, max: 100_000, whole: true });
const goal_ratio = 0.9;
const goal_added_p50_ms = 1;
const warmup_calls = 300;
const drain_ms_max = 30_000;

/** A child process answering one IPC request at a time. */
class Child {
  private constructor(
    readonly process: ChildProcess,
    private readonly first: unknown,
  ) {}

  static async start(script: string): Promise<Child> {
    const child = fork(join(import.meta.dirname, script), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
    const first = await new Promise<unknown>((resolve, reject) => {
      child.once("message", resolve);
      child.once("exit", (code) => reject(new Error(`${script} exited ${code}`)));
    });
    return new Child(child, first);
  }

  get hello(): unknown {
    return this.first;
  }

  async ask<T>(message: unknown): Promise<T> {
    const reply = once(this.process, "message") as Promise<[T]>;
    this.process.send(message as object);
    return (await reply)[0];
  }

  async close(): Promise<void> {
    if (this.process.exitCode !== null) return;
    this.process.kill();
    await once(this.process, "exit");
  }
}

async function command<T extends ClientAnswer["op"]>(client: Child, message: ClientCommand & { op: T }): Promise<Extract<ClientAnswer, { op: T }>> {
  const reply = await client.ask<ClientAnswer>(message);
  if (reply.op === "error") throw new Error(`bench client: ${reply.message}`);
  return reply as Extract<ClientAnswer, { op: T }>;
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
const cpuNow = () => {
  const used = process.cpuUsage();
  return used.user + used.system;
};

/** The yardstick relay: request and response piped through Node's http module, nothing else. */
async function bareRelay(upstream_url: string): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(upstream_url);
  const agent = new Agent({ keepAlive: true });
  const server = createServer((request, response) => {
    const { connection: _connection, ...headers } = request.headers;
    const upstream = httpRequest({ hostname: target.hostname, port: target.port, path: request.url, method: request.method, headers: { ...headers, host: target.host }, agent }, (incoming) => {
      response.writeHead(incoming.statusCode ?? 502, incoming.headers);
      incoming.pipe(response);
    });
    upstream.on("error", () => response.destroy());
    request.pipe(upstream);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      agent.destroy();
    },
  };
}

interface Side {
  seconds: number;
  latencies_ms: number[];
  cpu_us: { client: number; upstream: number; observer: number };
}

const emptySide = (): Side => ({ seconds: 0, latencies_ms: [], cpu_us: { client: 0, upstream: 0, observer: 0 } });

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-observer-"));
  const upstream = await Child.start("observer-upstream.js");
  const client = await Child.start("observer-client.js");
  const upstream_url = String(upstream.hello);
  const bursar = await createBursar({ db: join(dir, "bursar.db") });
  const access = { operator: OperatorTokens.fromToken("bench-operator-token-0123456789"), ledger: bursar.ledger };
  const evidence = evidenceSources({ access, bursar, master_key: "bench-master-key-0123456789" });
  const app = await buildServer({ logger: false, plugins: evidence.plugins, onClose: () => bursar.close() });
  const bursar_url = await app.listen({ host: "127.0.0.1", port: 0 });
  const bare = await bareRelay(upstream_url);
  let next_id = 1;

  const cpu = async () => ({
    client: (await command(client, { op: "cpu" })).cpu_us,
    upstream: (await upstream.ask<{ cpu_us: number }>("cpu")).cpu_us,
    observer: cpuNow(),
  });

  /** One measured run into `side`; the observed side's CPU includes writing its evidence (drained after the run). */
  const measure = async (side: Side, url: string, headers: Record<string, string>, total: number, observed: boolean, in_flight = concurrency) => {
    const before = await cpu();
    const result = await command(client, { op: "run", url, headers, total, concurrency: in_flight, first_id: next_id });
    next_id += total;
    if (observed && !(await evidence.observer.recorder.drain(drain_ms_max))) throw new Error("the observer's evidence did not drain");
    const after = await cpu();
    side.seconds += result.seconds;
    side.latencies_ms.push(...result.latencies_ms);
    for (const name of ["client", "upstream", "observer"] as const) side.cpu_us[name] += after[name] - before[name];
  };

  try {
    const results: string[] = [];
    const goals: string[] = [];
    for (const path of ["/mcp-json", "/mcp-plain"]) {
      const created = await evidence.sources.create({ kind: "observer", name: `bench${path}`, upstream_url: `${upstream_url}${path}` });
      const token = (created.secrets as { observer_token: string }).observer_token;
      const direct_url = `${upstream_url}${path}`;
      const observed_url = `${bursar_url}/observe`;
      const direct_headers = (await command(client, { op: "session", url: direct_url, extra: {} })).headers;
      const observed_headers = (await command(client, { op: "session", url: observed_url, extra: { "x-bursar-observer-token": token } })).headers;
      const bare_url = `${bare.url}${path}`;
      const bare_headers = (await command(client, { op: "session", url: bare_url, extra: {} })).headers;
      await measure(emptySide(), direct_url, direct_headers, warmup_calls, false);
      await measure(emptySide(), observed_url, observed_headers, warmup_calls, true);
      await measure(emptySide(), bare_url, bare_headers, warmup_calls, false);
      const direct = emptySide();
      const observed = emptySide();
      const relayed = emptySide();
      const orders = [
        ["direct", "observed", "bare"],
        ["observed", "bare", "direct"],
        ["bare", "direct", "observed"],
      ] as const;
      for (let round = 0; round < rounds; round++) {
        const share = Math.floor(calls / rounds) + (round < calls % rounds ? 1 : 0);
        for (const side of orders[round % orders.length]!) {
          if (side === "observed") await measure(observed, observed_url, observed_headers, share, true);
          else if (side === "bare") await measure(relayed, bare_url, bare_headers, share, false);
          else await measure(direct, direct_url, direct_headers, share, false);
        }
      }
      const direct_alone = emptySide();
      const observed_alone = emptySide();
      for (let round = 0; round < rounds; round++) {
        const share = Math.floor(unloaded_calls / rounds) + (round < unloaded_calls % rounds ? 1 : 0);
        const order = round % 2 === 0 ? [false, true] : [true, false];
        for (const is_observed of order) {
          if (is_observed) await measure(observed_alone, observed_url, observed_headers, share, true, 1);
          else await measure(direct_alone, direct_url, direct_headers, share, false, 1);
        }
      }
      const label = path === "/mcp-json" ? "JSON responses" : "SSE responses";
      const ratio = calls / observed.seconds / (calls / direct.seconds);
      const p = (side: Side, q: number) => percentile(side.latencies_ms, q);
      const added_alone = p(observed_alone, 50) - p(direct_alone, 50);
      goals.push(`${label} ratio ${ratio.toFixed(2)} ${ratio >= goal_ratio ? "met" : "NOT met"}, added p50 one at a time ${added_alone.toFixed(3)} ms ${added_alone < goal_added_p50_ms ? "met" : "NOT met"}`);
      const per_call = (us: number) => `${Math.round(us / calls)} µs`;
      results.push(
        `  ${label}: direct ${Math.round(calls / direct.seconds)} calls/s, observed ${Math.round(calls / observed.seconds)} calls/s (ratio ${ratio.toFixed(2)}); ` +
          `added latency p50 ${(p(observed, 50) - p(direct, 50)).toFixed(3)} ms, p99 ${(p(observed, 99) - p(direct, 99)).toFixed(3)} ms ` +
          `(direct p50 ${p(direct, 50).toFixed(2)} / p99 ${p(direct, 99).toFixed(2)} ms)`,
        `    CPU per call: client ${per_call(direct.cpu_us.client)} direct / ${per_call(observed.cpu_us.client)} observed, upstream ${per_call(direct.cpu_us.upstream)} / ${per_call(observed.cpu_us.upstream)}, ` +
          `observer ${per_call(observed.cpu_us.observer)} (relay and evidence), bare relay ${per_call(relayed.cpu_us.observer)} (client ${per_call(relayed.cpu_us.client)}, upstream ${per_call(relayed.cpu_us.upstream)})`,
        `    yardstick, a bare Node http relay: ${Math.round(calls / relayed.seconds)} calls/s (ratio ${(calls / relayed.seconds / (calls / direct.seconds)).toFixed(2)}); ` +
          `the observer reaches ${((calls / observed.seconds) / (calls / relayed.seconds)).toFixed(2)} of it`,
        `    one call at a time (${unloaded_calls} per side): added p50 ${added_alone.toFixed(3)} ms, p99 ${(p(observed_alone, 99) - p(direct_alone, 99)).toFixed(3)} ms ` +
          `(direct p50 ${p(direct_alone, 50).toFixed(2)} / p99 ${p(direct_alone, 99).toFixed(2)} ms)`,
      );
      if (path === "/mcp-plain") {
        const direct_ttfb: number[] = [];
        const observed_ttfb: number[] = [];
        for (let round = 0; round < rounds; round++) {
          const samples = Math.floor(ttfb_samples / rounds) + (round < ttfb_samples % rounds ? 1 : 0);
          const order = round % 2 === 0 ? [false, true] : [true, false];
          for (const is_observed of order) {
            const answer = await command(client, { op: "ttfb", url: is_observed ? observed_url : direct_url, headers: is_observed ? observed_headers : direct_headers, samples, first_id: next_id });
            next_id += samples;
            (is_observed ? observed_ttfb : direct_ttfb).push(...answer.latencies_ms);
          }
        }
        results.push(`  SSE time to first byte: direct p50 ${percentile(direct_ttfb, 50).toFixed(3)} ms, observed p50 ${percentile(observed_ttfb, 50).toFixed(3)} ms (difference ${(percentile(observed_ttfb, 50) - percentile(direct_ttfb, 50)).toFixed(3)} ms)`);
      }
    }
    await evidence.observer.recorder.drain(drain_ms_max);
    const recorded = (await bursar.log.treeSize()) - 1;
    console.log(
      `bench:observer  ${calls} tools/call per side in ${rounds} alternating rounds, ${concurrency} in flight, loopback, SDK MCP server upstream; ` +
        `client, observer and upstream in 3 processes on ${availableParallelism()} cores`,
    );
    for (const line of results) console.log(line);
    console.log(`  evidence entries written meanwhile (off the critical path): ${recorded}`);
    console.log(`  goals (ratio >= ${goal_ratio} at ${concurrency} in flight; added p50 < ${goal_added_p50_ms} ms): ${goals.join("; ")}`);
  } finally {
    await app.close();
    await bare.close();
    await client.close();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
