// The upstream for bench:observer: an SDK MCP server (stateful; `/mcp-json` answers JSON,
// `/mcp-plain` SSE) in its own process; it sends its URL to the parent over IPC, and its CPU
// time used so far when asked ("cpu").

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const sessions = new Map<string, StreamableHTTPServerTransport>();
const http = createServer(async (request, response) => {
  const path = (request.url ?? "/").split("?")[0]!;
  const session = request.headers["mcp-session-id"];
  let transport = typeof session === "string" ? sessions.get(session) : undefined;
  if (!transport) {
    transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: path === "/mcp-json", onsessioninitialized: (id) => void sessions.set(id, transport!) });
    const server = new Server({ name: "bench-upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "echo", inputSchema: { type: "object" as const } }] }));
    server.setRequestHandler(CallToolRequestSchema, async (call) => ({ content: [{ type: "text", text: JSON.stringify(call.params.arguments ?? {}) }] }));
    await server.connect(transport);
  }
  await transport.handleRequest(request, response);
});
http.listen(0, "127.0.0.1", () => {
  const { port } = http.address() as { port: number };
  process.send?.(`http://127.0.0.1:${port}`);
});
process.on("message", (message) => {
  if (message !== "cpu") return;
  const used = process.cpuUsage();
  process.send?.({ op: "cpu", cpu_us: used.user + used.system });
});
process.on("disconnect", () => process.exit(0));
