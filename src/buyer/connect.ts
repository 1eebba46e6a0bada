// How a buyer reaches a gate: MCP over Streamable HTTP with a bearer agent token, or over
// stdio through `bursar mcp-stdio` (which itself bridges to the gate's /mcp).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export type Connection = { kind: "http"; url: string; token: string } | { kind: "stdio"; url: string; token: string; bin: string };

export const buyer_client_info = { name: "bursar-buyer", version: "0.1.0" };

export async function connect(connection: Connection): Promise<Client> {
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
    stderr: "inherit",
  });
  await client.connect(transport);
  return client;
}
