// The answer's framing follows RFC 9112 §6 whatever the upstream sent: no Transfer-Encoding (nor
// chunked framing) to an HTTP/1.0 client, whose answer of unknown length ends with the
// connection, and none on an answer without a body (204, 304).

import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource, rawRequest, toolCall } from "./support.js";

let h: Harness;
let upstream: Server;
let upstream_url: string;

/** The upstream's whole answer for each path, as raw bytes. */
const answers: Record<string, string> = {
  "/gzip-chunked": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
  "/chunked": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTrailer: x-checksum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nx-checksum: c0ffee\r\n\r\n",
  "/204": "HTTP/1.1 204 No Content\r\nX-Kept: yes\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
  "/304": "HTTP/1.1 304 Not Modified\r\nX-Kept: yes\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
};

/** Answers once the request's head and its Content-Length body have arrived. */
function answerWhole(socket: Socket): void {
  let received = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    const head_end = received.indexOf("\r\n\r\n");
    if (head_end === -1) return;
    const head = received.subarray(0, head_end).toString();
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (received.length < head_end + 4 + length) return;
    const path = /^\S+ (\S+)/.exec(head)![1]!.replace(/^\/mcp/, "");
    socket.end(answers[path] ?? "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  });
  socket.on("error", () => undefined);
}

beforeAll(async () => {
  upstream = createServer(answerWhole);
  upstream_url = await listenLoopback(upstream);
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const body = JSON.stringify(toolCall(1, "echo", {}));

/** Sends one POST in `version` through the observer to `path` and reads all the client gets until the connection closes. */
async function post(path: string, version: "1.0" | "1.1", extra = ""): Promise<{ head: string; body: string }> {
  const source = await observerSource(h, `${upstream_url}/mcp`);
  const request = `POST /observe${path} HTTP/${version}\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\ncontent-type: application/json\r\nContent-Length: ${body.length}\r\n${extra}Connection: close\r\n\r\n${body}`;
  const answer = await rawRequest(h.url, request);
  const head_end = answer.indexOf("\r\n\r\n");
  return { head: answer.slice(0, head_end), body: answer.slice(head_end + 4) };
}

describe("an answer to an HTTP/1.0 client", () => {
  it("carries no Transfer-Encoding nor chunked framing when the upstream's is gzip, chunked: the coded bytes, ended by the close", async () => {
    const answer = await post("/gzip-chunked", "1.0");
    expect(answer.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.head).not.toMatch(/transfer-encoding/i);
    expect(answer.head).toMatch(/\r\nconnection: close(\r\n|$)/i);
    expect(answer.head).toMatch(/\r\ncontent-type: application\/json(\r\n|$)/i);
    expect(answer.body).toBe("hello");
  });

  it("is not chunked even when the client sends TE: chunked, and drops the Trailer header no trailer can follow", async () => {
    const answer = await post("/chunked", "1.0", "TE: chunked\r\n");
    expect(answer.head).not.toMatch(/transfer-encoding/i);
    expect(answer.head).not.toMatch(/\r\ntrailer:/i);
    expect(answer.body).toBe("hello world");
  });
});

describe("an answer to an HTTP/1.1 client", () => {
  it("still names a transfer coding before chunked, chunked again", async () => {
    const answer = await post("/gzip-chunked", "1.1");
    expect(answer.head).toMatch(/\r\ntransfer-encoding: gzip, chunked(\r\n|$)/i);
    expect(answer.body).toBe("5\r\nhello\r\n0\r\n\r\n");
  });

  for (const status of ["204", "304"]) {
    it(`carries no Transfer-Encoding on a ${status}, its other headers kept`, async () => {
      const answer = await post(`/${status}`, "1.1");
      expect(answer.head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(answer.head).not.toMatch(/transfer-encoding/i);
      expect(answer.head).toMatch(/\r\nx-kept: yes(\r\n|$)/i);
      expect(answer.body).toBe("");
    });
  }
});
