// A real MCP server built with the SDK (stateful Streamable HTTP, session ids, SSE with an
// event store for resumption, a JSON-response twin, and stateless twins without session ids),
// recording the headers it receives.

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { InMemoryEventStore } from "@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

export interface Upstream {
  url: string;
  /** Headers of every request the server received, lower-cased names. */
  seen: Array<{ method: string; path: string; headers: IncomingMessage["headers"] }>;
  close(): Promise<void>;
}

const tools = [
  { name: "echo", description: "echo text", inputSchema: { type: "object" as const, properties: { text: { type: "string" } } } },
  { name: "charge", description: "a money tool", inputSchema: { type: "object" as const, properties: { amount: { type: "number" }, currency: { type: "string" } } } },
  { name: "fail", description: "a tool error", inputSchema: { type: "object" as const } },
  { name: "rpc_error", description: "a JSON-RPC error", inputSchema: { type: "object" as const } },
  { name: "poll", description: "closes its SSE stream, answers on the resumed stream", inputSchema: { type: "object" as const } },
  { name: "big", description: "a large result", inputSchema: { type: "object" as const, properties: { size: { type: "number" } } } },
  {
    name: "slow",
    description: "answers its arguments but pad after delay_ms, or once wait_for calls of its group have arrived",
    inputSchema: { type: "object" as const, properties: { delay_ms: { type: "number" }, wait_for: { type: "number" }, group: { type: "string" } } },
  },
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Longest a `slow` call waits for the rest of its group: a test that sent too few still ends. */
const barrier_wait_ms_max = 30_000;
const barriers = new Map<string, { arrived: number; open: () => void; opened: Promise<void> }>();

/** Resolves once `count` calls of `group` have arrived (whatever the machine's load), or after barrier_wait_ms_max. */
function barrier(group: string, count: number): Promise<void> {
  let entry = barriers.get(group);
  if (!entry) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    entry = { arrived: 0, open, opened };
    barriers.set(group, entry);
  }
  entry.arrived += 1;
  if (entry.arrived >= count) entry.open();
  return Promise.race([entry.opened, sleep(barrier_wait_ms_max).then(() => undefined)]);
}

/** How many calls of `group` have reached the `slow` tool so far. */
export function arrivedIn(group: string): number {
  return barriers.get(group)?.arrived ?? 0;
}

function mcpServer(): Server {
  const server = new Server({ name: "upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case "echo":
        return { content: [{ type: "text", text: String(args.text ?? "") }] };
      case "charge":
        return { content: [{ type: "text", text: `charged ${String(args.amount)}` }] };
      case "fail":
        return { isError: true, content: [{ type: "text", text: "the tool failed" }] };
      case "rpc_error":
        throw new McpError(ErrorCode.InvalidParams, "rpc_error always refuses");
      case "poll":
        extra.closeSSEStream?.();
        await sleep(150);
        return { content: [{ type: "text", text: "polled" }] };
      case "big":
        return { content: [{ type: "text", text: "x".repeat(Number(args.size ?? 100_000)) }] };
      case "slow": {
        if (typeof args.wait_for === "number") await barrier(String(args.group), args.wait_for);
        await sleep(Number(args.delay_ms ?? 0));
        const { pad: _pad, ...answered } = args;
        return { content: [{ type: "text", text: JSON.stringify(answered) }] };
      }
      default:
        throw new McpError(ErrorCode.MethodNotFound, `no tool ${request.params.name}`);
    }
  });
  return server;
}

const stateless_paths = new Set(["/mcp-stateless", "/mcp-stateless-json"]);

/** A stateless server (no session ids) answers each request with a fresh transport, as the SDK's stateless example does. */
async function stateless(path: string, request: IncomingMessage, response: ServerResponse): Promise<void> {
  // The SSE twin keeps events, so `poll` can close its stream early, though without a session nothing can resume it.
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: path === "/mcp-stateless-json",
    ...(path === "/mcp-stateless" ? { eventStore: new InMemoryEventStore(), retryInterval: 20 } : {}),
  });
  const server = mcpServer();
  response.on("close", () => void transport.close().then(() => server.close()));
  await server.connect(transport);
  await transport.handleRequest(request, response);
}

/** Bodies of `/mcp-large` are read as an app with its own body parser reads them: here up to 32 MiB (the SDK alone takes 4 MiB). */
const large_body_bytes_max = 32 * 1_048_576;

async function parsedBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > large_body_bytes_max) throw new Error("body too large");
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
}

/**
 * `/mcp` answers with SSE (resumable, event ids); `/mcp-plain` with SSE without event ids; `/mcp-json` with JSON bodies;
 * `/mcp-large` too, taking bodies past 4 MiB; `/mcp-stateless` and `/mcp-stateless-json` like `/mcp-plain` and `/mcp-json`, without sessions.
 */
export async function startUpstream(): Promise<Upstream> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const seen: Upstream["seen"] = [];
  const http: HttpServer = createServer(async (request, response) => {
    const path = (request.url ?? "/").split("?")[0]!;
    seen.push({ method: request.method ?? "", path, headers: { ...request.headers } });
    if (stateless_paths.has(path)) return stateless(path, request, response);
    if (path !== "/mcp" && path !== "/mcp-json" && path !== "/mcp-plain" && path !== "/mcp-large") return void response.writeHead(404).end("no such path");
    const session = request.headers["mcp-session-id"];
    let transport = typeof session === "string" ? sessions.get(session) : undefined;
    if (!transport) {
      if (typeof session === "string") return void response.writeHead(404, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: path === "/mcp-json" || path === "/mcp-large",
        ...(path === "/mcp" ? { eventStore: new InMemoryEventStore(), retryInterval: 20 } : {}),
        onsessioninitialized: (id) => void sessions.set(id, transport!),
        onsessionclosed: (id) => void sessions.delete(id),
      });
      await mcpServer().connect(transport);
    }
    const body = path === "/mcp-large" && request.method === "POST" ? await parsedBody(request).catch(() => null) : undefined;
    if (body === null) return void response.writeHead(400, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}');
    await transport.handleRequest(request, response, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const address = http.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    seen,
    async close() {
      for (const transport of sessions.values()) await transport.close().catch(() => undefined);
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
