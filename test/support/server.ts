// A real `bursar serve` in this process on a loopback port, with a temporary data
// directory, an MCP SDK client per agent, and operator API helpers.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.js";
import { startServer, type Started } from "../../src/server/start.js";

export const operator_token = "test-operator-token-0123456789";

export interface TestServer {
  started: Started;
  url: string;
  dir: string;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: T }>;
  agent(name?: string, block?: Record<string, unknown>): Promise<{ agent_id: string; token: string; block_id: string }>;
  client(token: string): Promise<Client>;
  close(): Promise<void>;
}

/** Calls `url`'s operator API: JSON in and out, the operator token unless another is given. */
export function operatorApi(url: string) {
  return async <T = Record<string, unknown>>(method: string, path: string, body?: unknown, token = operator_token): Promise<{ status: number; body: T }> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as T };
  };
}

export async function testServer(env: Record<string, string> = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-http-"));
  const config = loadConfig({ BURSAR_DATA_DIR: dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: operator_token, ...env });
  const started = await startServer(config, { logger: false });
  const clients: Client[] = [];
  const api = operatorApi(started.url);
  return {
    started,
    url: started.url,
    dir,
    api,
    async agent(name = "buyer", block = {}) {
      const agent = await api<{ agent_id: string; token: string }>("POST", "/api/v1/agents", { name });
      const created = await api<{ block_id: string }>("POST", "/api/v1/blocks", {
        agent_id: agent.body.agent_id,
        currency: "INR",
        reserved: 1_000_000,
        ttl_seconds: 86_400,
        velocity: { max_calls: 1000, window_seconds: 60 },
        ...block,
      });
      if (created.status !== 201) throw new Error(`block: ${JSON.stringify(created.body)}`);
      return { ...agent.body, block_id: created.body.block_id };
    },
    async client(token: string) {
      const client = new Client({ name: "test-buyer", version: "1.0.0" });
      const transport = new StreamableHTTPClientTransport(new URL(`${started.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      await client.connect(transport);
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients) await client.close().catch(() => undefined);
      await started.app.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Pays an order through the simulator's test checkout; returns the payment id. */
export async function payOrder(url: string, order_id: string, card = "4111111111111111"): Promise<string> {
  const response = await fetch(`${url}/simulator/sim/orders/${order_id}/pay`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ card }),
  });
  const body = (await response.json()) as { razorpay_payment_id?: string };
  if (!body.razorpay_payment_id) throw new Error(`checkout failed: ${JSON.stringify(body)}`);
  return body.razorpay_payment_id;
}

/** Creates an order through the gate as `client`'s agent and pays it at the simulator's test checkout. */
export async function paidOrder(url: string, client: Client, args: Record<string, unknown>): Promise<{ order_id: string; payment_id: string }> {
  const created = await client.callTool({ name: "create_order", arguments: args });
  const order = (created.structuredContent as { order?: { id: string } } | undefined)?.order;
  if (!order) throw new Error(`create_order got no order: ${JSON.stringify(created.structuredContent)}`);
  return { order_id: order.id, payment_id: await payOrder(url, order.id) };
}

/**
 * POSTs a tools/call to /mcp whose `arguments` is the raw JSON text given, so what an SDK client
 * would never send (1e400, a "__proto__" key) reaches the gate. Answers the HTTP status and the
 * JSON-RPC reply's text (without SSE framing, if the gate streamed it).
 */
export async function rawToolCall(url: string, token: string, name: string, args_json: string): Promise<{ status: number; text: string }> {
  return rawMcpPost(url, token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":${JSON.stringify(name)},"arguments":${args_json}}}`);
}

/** POSTs `body` to /mcp as it is, with an MCP client's headers; answers as rawToolCall does. */
export async function rawMcpPost(url: string, token: string, body: string | Uint8Array<ArrayBuffer>): Promise<{ status: number; text: string }> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${token}` },
    body,
  });
  const text = await response.text();
  const framed = text.startsWith("event:") || text.startsWith("data:");
  return { status: response.status, text: framed ? text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1) : text };
}
