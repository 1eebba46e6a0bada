// The load generator for bench:observer, in its own process like the upstream: a gateway does
// not share the observer's event loop, so neither does the client. The same client, with the
// same fetch code path, drives the direct and the observed runs; the parent asks over IPC.

import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

export type ClientCommand =
  | { op: "session"; url: string; extra: Record<string, string> }
  | { op: "run"; url: string; headers: Record<string, string>; total: number; concurrency: number; first_id: number }
  | { op: "ttfb"; url: string; headers: Record<string, string>; samples: number; first_id: number }
  | { op: "cpu" };

export type ClientAnswer =
  | { op: "session"; headers: Record<string, string> }
  | { op: "run"; seconds: number; latencies_ms: number[] }
  | { op: "ttfb"; latencies_ms: number[] }
  | { op: "cpu"; cpu_us: number }
  | { op: "error"; message: string };

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
async function run(url: string, headers: Record<string, string>, total: number, concurrency: number, first_id: number): Promise<{ seconds: number; latencies_ms: number[] }> {
  const latencies_ms: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < total) {
      const id = first_id + ++next;
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

/** Time from sending a call to the first chunk of its (SSE) response body, one call at a time. */
async function ttfb(url: string, headers: Record<string, string>, samples: number, first_id: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < samples; i++) {
    const at = performance.now();
    const response = await fetch(url, { method: "POST", headers, body: call(first_id + i) });
    const reader = response.body!.getReader();
    await reader.read();
    out.push(performance.now() - at);
    while (!(await reader.read()).done);
  }
  return out;
}

async function answer(command: ClientCommand): Promise<ClientAnswer> {
  switch (command.op) {
    case "session":
      return { op: "session", headers: await session(command.url, command.extra) };
    case "run":
      return { op: "run", ...(await run(command.url, command.headers, command.total, command.concurrency, command.first_id)) };
    case "ttfb":
      return { op: "ttfb", latencies_ms: await ttfb(command.url, command.headers, command.samples, command.first_id) };
    case "cpu": {
      const used = process.cpuUsage();
      return { op: "cpu", cpu_us: used.user + used.system };
    }
  }
}

process.on("message", (command: ClientCommand) => {
  answer(command).then(
    (reply) => process.send?.(reply),
    (error: unknown) => process.send?.({ op: "error", message: error instanceof Error ? error.message : String(error) }),
  );
});
process.on("disconnect", () => process.exit(0));
process.send?.({ op: "ready" });
