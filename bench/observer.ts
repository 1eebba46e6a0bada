// bench:observer — the chained observer's cost: tools/call throughput and latency (p50/p99)
// through Bursar's observer versus straight to the same SDK MCP server, and the SSE
// time-to-first-byte difference. Loopback only; bounded by BENCH_CALLS.

import { fork } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { OperatorTokens } from "../src/datadir.js";
import { createBursar } from "../src/index.js";
import { buildServer } from "../src/server/app.js";
import { evidenceSources } from "../src/server/routes/evidence-sources.js";

const calls = Number(process.env.BENCH_CALLS ?? 3000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);
const ttfb_samples = Number(process.env.BENCH_TTFB_SAMPLES ?? 300);
const warmup_calls = 300;

/** The upstream MCP server runs in its own process, so it does not share the observer's event loop. */
async function upstreamServer(): Promise<{ url: string; close(): Promise<void> }> {
  const child = fork(join(import.meta.dirname, "observer-upstream.js"), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once("message", (message) => resolve(String(message)));
    child.once("exit", (code) => reject(new Error(`upstream exited ${code}`)));
  });
  return { url, close: async () => void (child.kill(), await once(child, "exit")) };
}

const jsonHeaders = { accept: "application/json, text/event-stream", "content-type": "application/json" };

async function session(url: string, extra: Record<string, string>): Promise<Record<string, string>> {
  const init = await fetch(url, {
    method: "POST",
    headers: { ...jsonHeaders, ...extra },
    body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "bench", version: "1" } } }),
  });
  await init.arrayBuffer();
  const headers = { ...jsonHeaders, ...extra, "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
  await (await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).arrayBuffer();
  return headers;
}

const call = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "echo", arguments: { amount: 50_000 + id, currency: "INR", note: "bench" } } });

/** `total` tools/calls with `concurrency` in flight; latency of each in ms. */
async function run(url: string, headers: Record<string, string>, total: number): Promise<{ seconds: number; latencies_ms: number[] }> {
  const latencies_ms: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      const id = ++next;
      const at = performance.now();
      const response = await fetch(url, { method: "POST", headers, body: call(id) });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`status ${response.status}`);
      latencies_ms.push(performance.now() - at);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { seconds: (performance.now() - started) / 1000, latencies_ms };
}

async function ttfb(url: string, headers: Record<string, string>, samples: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const at = performance.now();
    const response = await fetch(url, { method: "POST", headers, body: call(i + 1_000_000) });
    const reader = response.body!.getReader();
    await reader.read();
    out.push(performance.now() - at);
    while (!(await reader.read()).done);
  }
  return out;
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-observer-"));
  const upstream = await upstreamServer();
  const bursar = await createBursar({ db: join(dir, "bursar.db") });
  const access = { operator: OperatorTokens.fromToken("bench-operator-token-0123456789"), ledger: bursar.ledger };
  const evidence = evidenceSources({ access, bursar, master_key: "bench-master-key-0123456789" });
  const app = await buildServer({ logger: false, plugins: evidence.plugins, onClose: () => bursar.close() });
  const bursar_url = await app.listen({ host: "127.0.0.1", port: 0 });
  try {
    const results: string[] = [];
    for (const path of ["/mcp-json", "/mcp-plain"]) {
      const created = await evidence.sources.create({ kind: "observer", name: `bench${path}`, upstream_url: `${upstream.url}${path}` });
      const token = (created.secrets as { observer_token: string }).observer_token;
      const direct_headers = await session(`${upstream.url}${path}`, {});
      const observed_headers = await session(`${bursar_url}/observe`, { "x-bursar-observer-token": token });
      await run(`${upstream.url}${path}`, direct_headers, warmup_calls);
      await run(`${bursar_url}/observe`, observed_headers, warmup_calls);
      const direct = await run(`${upstream.url}${path}`, direct_headers, calls);
      const observed = await run(`${bursar_url}/observe`, observed_headers, calls);
      await evidence.observer.recorder.drain(30_000);
      const label = path === "/mcp-json" ? "JSON responses" : "SSE responses";
      const ratio = calls / observed.seconds / (calls / direct.seconds);
      results.push(
        `  ${label}: direct ${Math.round(calls / direct.seconds)} calls/s, observed ${Math.round(calls / observed.seconds)} calls/s (ratio ${ratio.toFixed(2)}); ` +
          `added latency p50 ${(percentile(observed.latencies_ms, 50) - percentile(direct.latencies_ms, 50)).toFixed(3)} ms, p99 ${(percentile(observed.latencies_ms, 99) - percentile(direct.latencies_ms, 99)).toFixed(3)} ms`,
      );
      if (path === "/mcp-plain") {
        const direct_ttfb = await ttfb(`${upstream.url}${path}`, direct_headers, ttfb_samples);
        const observed_ttfb = await ttfb(`${bursar_url}/observe`, observed_headers, ttfb_samples);
        results.push(`  SSE time to first byte: direct p50 ${percentile(direct_ttfb, 50).toFixed(3)} ms, observed p50 ${percentile(observed_ttfb, 50).toFixed(3)} ms (difference ${(percentile(observed_ttfb, 50) - percentile(direct_ttfb, 50)).toFixed(3)} ms)`);
      }
    }
    const recorded = (await bursar.log.treeSize()) - 1;
    console.log(`bench:observer  ${calls} tools/call per run, ${concurrency} in flight, loopback, SDK MCP server upstream`);
    for (const line of results) console.log(line);
    console.log(`  evidence entries written meanwhile (off the critical path): ${recorded}`);
  } finally {
    await app.close();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
