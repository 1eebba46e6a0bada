// A request with two Authorization headers is refused (400 malformed) before any route reads
// one: Node keeps the first, and a gateway in front that reads the last would take the request
// for another principal than Bursar did (RFC 9110 allows one).

import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

/** Sends `head` (request line and headers, CRLF-separated) and `body` over a fresh connection; the status and body answered. */
function rawExchange(head: string[], body = ""): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.end(`${[...head, `content-length: ${Buffer.byteLength(body)}`, "connection: close"].join("\r\n")}\r\n\r\n${body}`);
    });
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve({ status: Number(text.split(" ")[1]), body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}

describe("two Authorization headers", () => {
  it("are refused on /mcp and on the operator API, whichever comes first; one is taken", async () => {
    const agent = await server.agent("two-credentials");
    const call = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "get_block", arguments: {} } });
    const mcp = (authorizations: string[]) =>
      rawExchange(["POST /mcp HTTP/1.1", "host: 127.0.0.1", "content-type: application/json", "accept: application/json, text/event-stream", ...authorizations.map((value, i) => `${i % 2 ? "Authorization" : "authorization"}: ${value}`)], call);
    for (const pair of [[`Bearer ${agent.token}`, "Bearer bsr_agent_not_a_real_token_000000"], ["Bearer bsr_agent_not_a_real_token_000000", `Bearer ${agent.token}`]]) {
      const answer = await mcp(pair);
      expect({ status: answer.status, body: JSON.parse(answer.body) as unknown }).toEqual({
        status: 400,
        body: { error: { code: "malformed", message: "the request has more than one Authorization header; send one credential" } },
      });
    }
    expect((await mcp([`Bearer ${agent.token}`])).status).toBe(200);

    const inbox = (count: number) => rawExchange(["GET /api/v1/inbox HTTP/1.1", "host: 127.0.0.1", ...Array.from({ length: count }, () => `authorization: Bearer ${operator_token}`)]);
    expect((await inbox(2)).status).toBe(400);
    expect((await inbox(1)).status).toBe(200);
  });
});
