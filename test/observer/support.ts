// Observer test helpers: an observer source over the harness, raw JSON-RPC over HTTP (to
// compare bytes), an SDK client that reaches the upstream through the observer, and an
// evidence store the test can stop and restart.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { connect, type AddressInfo, type Server } from "node:net";
import type { AppendInput } from "../../src/evidence/index.js";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import type { EvidenceSink } from "../../src/observer/index.js";
import type { Harness } from "../ingest/support.js";

/** The calls a system.evidence_gap entry's body counts for `source_id`, if any. */
export function gapCalls(body: Record<string, unknown>, source_id: string): number | undefined {
  return (body.by_source as Array<{ source_id: string; calls: number }>).find((counted) => counted.source_id === source_id)?.calls;
}

/** The bodies of the observer.call entries a source's calls wrote, once the queue has drained
 *  (the drain must succeed within `drain_ms`). */
export async function recorded(h: Harness, source_id: string, drain_ms = 5_000): Promise<Array<Record<string, unknown>>> {
  if (!(await h.evidence.observer.recorder.drain(drain_ms))) throw new Error(`the observer's queue did not drain within ${drain_ms} ms`);
  return (await h.entries("observer.call")).filter((stored) => stored.entry.source === source_id).map((stored) => stored.entry.body as Record<string, unknown>);
}

/** Listens on a loopback port; returns the server's base URL. */
export async function listenLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export interface ObserverSourceCreated {
  id: string;
  observer_url: string;
  observer_token: string;
  origin: string;
}

export async function observerSource(h: Harness, upstream_url: string, shadow?: unknown): Promise<ObserverSourceCreated> {
  const created = await h.api<ObserverSourceCreated>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "their-mcp", upstream_url, ...(shadow ? { shadow } : {}) });
  if (created.status !== 201) throw new Error(`observer source: ${JSON.stringify(created.body)}`);
  return created.body;
}

export async function sdkClient(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "observed-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers },
    reconnectionOptions: { initialReconnectionDelay: 20, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
  });
  await client.connect(transport);
  return client;
}

export interface RawAnswer {
  status: number;
  headers: Headers;
  bytes: Buffer;
}

/** Sends `body` as JSON, or as it is when it is bytes (JSON written in a way JSON.stringify does not). */
export async function raw(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<RawAnswer> {
  const response = await fetch(url, {
    method,
    headers: { accept: "application/json, text/event-stream", ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: body instanceof Uint8Array ? new Uint8Array(body) : JSON.stringify(body) }),
  });
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
}

/** Opens a session with raw requests; returns the session id. */
export async function rawSession(url: string, headers: Record<string, string> = {}): Promise<string> {
  const init = await raw(url, "POST", headers, {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  });
  const session = init.headers.get("mcp-session-id");
  if (init.status !== 200 || !session) throw new Error(`initialize: ${init.status} ${init.bytes.toString()}`);
  const sessionHeaders = { ...headers, "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
  await raw(url, "POST", sessionHeaders, { jsonrpc: "2.0", method: "notifications/initialized" });
  return session;
}

export function toolCall(id: number, name: string, args: Record<string, unknown>): Record<string, unknown> {
  return { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } };
}

/** `text` with every UTF-16 unit written as a JSON `\uXXXX` escape (six bytes a character), for use inside a JSON string. */
export function unicodeEscaped(text: string): string {
  return Array.from({ length: text.length }, (_, i) => `\\u${text.charCodeAt(i).toString(16).padStart(4, "0")}`).join("");
}

/** The JSON text of `value` with the characters of its strings (keys and values) written as `\uXXXX` where `pattern`, repeated, says true. */
export function escapedJson(value: unknown, pattern: readonly boolean[]): string {
  let at = 0;
  const string = (text: string) => {
    let written = "";
    for (let i = 0; i < text.length; i++) written += pattern[at++ % pattern.length] ? unicodeEscaped(text[i]!) : JSON.stringify(text[i]).slice(1, -1);
    return `"${written}"`;
  };
  const write = (item: unknown): string => {
    if (typeof item === "string") return string(item);
    if (Array.isArray(item)) return `[${item.map(write).join(",")}]`;
    if (item !== null && typeof item === "object") return `{${Object.entries(item).map(([key, member]) => `${string(key)}:${write(member)}`).join(",")}}`;
    return JSON.stringify(item) ?? "null";
  };
  return write(value);
}

/** The evidence store as a separate connection to the database file, which the test stops and restarts. */
export class StoppableStore implements EvidenceSink {
  driver: SqliteDriver | null = null;
  constructor(
    private readonly path: string,
    private readonly h: () => Harness,
  ) {}
  start(): void {
    this.driver = new SqliteDriver({ path: this.path });
  }
  async stop(): Promise<void> {
    await this.driver?.close();
  }
  async append(inputs: readonly AppendInput[]): Promise<void> {
    if (!this.driver) throw new Error("store not started");
    await this.driver.transaction((tx) => this.h().bursar.log.appendMany(tx, inputs));
  }
}

export { LATEST_PROTOCOL_VERSION };

/** Writes `text` to a new connection to `base`; resolves with all it answered once it closes. */
export function rawRequest(base: string, text: string): Promise<string> {
  const socket = connect(Number(new URL(base).port), "127.0.0.1");
  socket.write(text);
  return new Promise<string>((resolve) => {
    let answer = "";
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString()));
    socket.on("close", () => resolve(answer));
  });
}
