// How a buyer reaches a gate: MCP over Streamable HTTP with a bearer agent token, or over
// stdio through `bursar mcp-stdio` (which itself bridges to the gate's /mcp).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { isPlainObject } from "../policy/index.js";
import { version } from "../version.js";

export type Connection = { kind: "http"; url: string; token: string } | { kind: "stdio"; url: string; token: string; bin: string };

export const buyer_client_info = { name: "bursar-buyer", version };

/**
 * The HTTP status (401 or 403) with which the gate refused the agent token, when `error` from
 * connect says so: the HTTP transport's error, or over stdio the bridge's JSON-RPC error, whose
 * data carries the gate's status as `http_status`. Undefined for every other failure.
 */
export function refusedTokenStatus(error: unknown): 401 | 403 | undefined {
  let status: unknown;
  if (error instanceof StreamableHTTPError) status = error.code;
  else if (error instanceof McpError && isPlainObject(error.data)) status = error.data.http_status;
  return status === 401 || status === 403 ? status : undefined;
}

/** Connects to the gate; over stdio, the bridge's diagnostics go to `stderr` once connected. */
export async function connect(connection: Connection, stderr: NodeJS.WritableStream = process.stderr): Promise<Client> {
  const client = new Client(buyer_client_info);
  if (connection.kind === "http") {
    const transport = new StreamableHTTPClientTransport(new URL(`${connection.url.replace(/\/+$/, "")}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${connection.token}` } },
    });
    await client.connect(transport);
    return client;
  }
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [connection.bin, "mcp-stdio", "--url", connection.url],
    // The bridge holds the agent token and nothing else: not the operator token or a model's API key this process may hold.
    env: { ...getDefaultEnvironment(), BURSAR_AGENT_TOKEN: connection.token },
    stderr: "pipe",
  });
  // What the bridge says while connecting is held back: a failed connect is the buyer's one line
  // to report (the bridge's error answer carries the same words), not two.
  const held: Buffer[] = [];
  const hold = (chunk: Buffer) => held.push(chunk);
  const bridge_stderr = transport.stderr;
  bridge_stderr?.on("data", hold);
  try {
    await client.connect(transport);
  } finally {
    bridge_stderr?.off("data", hold);
  }
  for (const chunk of held) stderr.write(chunk);
  bridge_stderr?.pipe(stderr, { end: false });
  return client;
}
