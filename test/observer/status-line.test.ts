// An upstream's status line that Node's client takes but its server cannot write (a control
// character in the reason phrase, a status below 100) must never throw out of the relay: that
// would end the whole Bursar process, payment gate included. The reason phrase gives way to the
// status's standard one; a status that cannot be written at all is answered 502.

import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, raw, recorded as recordedCalls, toolCall } from "./support.js";

/** The status line the raw upstream answers on each path. */
const status_lines: Record<string, string> = {
  "/control-in-reason": "HTTP/1.1 200 O\x01K",
  "/delete-in-reason": "HTTP/1.1 200 O\x7fK",
  "/status-099": "HTTP/1.1 099 Early",
  "/status-000": "HTTP/1.1 000 None",
  // Switching protocols, though no Upgrade was asked for (Bursar never forwards one): as a final
  // answer, and as an upgrade (which Node's client hands to an "upgrade" listener, or drops).
  "/status-101": "HTTP/1.1 101 Switching Protocols",
  "/status-101-upgrade": "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade",
  "/plain": "HTTP/1.1 200 OK",
};

let h: Harness;
let upstream: Server;
let upstream_url: string;

/** Reads one request (Content-Length framed) off the socket and answers its JSON-RPC id, under the path's status line. */
function answerRaw(socket: import("node:net").Socket): void {
  let received = Buffer.alloc(0);
  socket.on("error", () => undefined);
  socket.on("data", (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    const head_end = received.indexOf("\r\n\r\n");
    if (head_end === -1) return;
    const head = received.subarray(0, head_end).toString("latin1");
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
    if (received.length < head_end + 4 + length) return;
    const path = head.split(" ")[1]!;
    const request = JSON.parse(received.subarray(head_end + 4, head_end + 4 + length).toString("utf8")) as { id: number };
    const body = JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { content: [{ type: "text", text: "done" }] } });
    const connection = path.endsWith("-upgrade") ? "" : "connection: close\r\n";
    const head_out = `${status_lines[path]!}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${connection}\r\n`;
    socket.end(Buffer.concat([Buffer.from(head_out, "latin1"), Buffer.from(body)]));
  });
}

beforeAll(async () => {
  upstream = createServer(answerRaw);
  upstream_url = `${await listenLoopback(upstream)}`;
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const recorded = (source_id: string) => recordedCalls(h, source_id);

describe("an upstream status line Node's server cannot write", () => {
  for (const path of ["/control-in-reason", "/delete-in-reason"]) {
    it(`is relayed with the status's standard reason phrase when only the phrase is refused (${path}), and the call recorded`, async () => {
      const source = await observerSource(h, `${upstream_url}${path}`);
      const answer = await raw(source.observer_url, "POST", { "x-bursar-observer-token": source.observer_token }, toolCall(3, "transfer_funds", { amount: 100 }));
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.bytes.toString())).toEqual({ jsonrpc: "2.0", id: 3, result: { content: [{ type: "text", text: "done" }] } });
      expect((await recorded(source.id)).map((body) => body.outcome)).toEqual([{ type: "result", is_error: false }]);
    });
  }

  for (const [path, upstream_status] of [["/status-099", 99], ["/status-000", 0], ["/status-101", 101], ["/status-101-upgrade", 101]] as const) {
    it(`answers 502 for a status it cannot take at all (${path}), records the call as unrelayable, and Bursar keeps serving`, async () => {
      const source = await observerSource(h, `${upstream_url}${path}`);
      const headers = { "x-bursar-observer-token": source.observer_token };
      const answer = await raw(source.observer_url, "POST", headers, toolCall(4, "transfer_funds", { amount: 100 }));
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.bytes.toString())).toMatchObject({ error: { code: "upstream_invalid_status" } });
      expect((await recorded(source.id)).map((body) => body.outcome)).toEqual([{ type: "no_response", reason: "unrelayable_status", status: 502, upstream_status }]);

      const plain = await observerSource(h, `${upstream_url}/plain`);
      const after = await raw(plain.observer_url, "POST", { "x-bursar-observer-token": plain.observer_token }, toolCall(5, "echo", {}));
      expect(after.status).toBe(200);
    });
  }
});
