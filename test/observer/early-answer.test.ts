// An upstream may answer before the client's upload has arrived (a 401 to a request it never
// reads, say). The observer relays the answer whole, then closes the connection without draining
// the rest of an unbounded upload: it stops reading, ends its side, and lets the client read the
// answer before the socket goes (a reset at once could lose answer bytes the client had not read).

import { createServer, request as httpRequest, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { listenLoopback, observerSource } from "./support.js";

const answer_bytes = 256 * 1024;
const upload_bytes = 64 * 1024 * 1024;
const upload_chunk = Buffer.alloc(64 * 1024, "x");

let h: Harness;
let upstream: Server;
let upstream_url: string;

beforeAll(async () => {
  const answer = Buffer.alloc(answer_bytes, "r");
  // Answers at once, reading nothing of the request.
  upstream = createServer((_request, response) => {
    response.writeHead(401, { "content-type": "application/json", "content-length": answer.length });
    response.end(answer);
  });
  upstream_url = `${await listenLoopback(upstream)}/mcp`;
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

interface Upload {
  status: number | undefined;
  answer_bytes: number;
  answer_ended: boolean;
  uploaded_bytes: number;
}

/** POSTs an upload of `upload_bytes` (declared, or chunked) through the observer, reading the answer `read_delay_ms` late. */
function upload(url: string, token: string, chunked: boolean, read_delay_ms: number): Promise<Upload> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const headers = { "content-type": "application/json", "x-bursar-observer-token": token, ...(chunked ? {} : { "content-length": String(upload_bytes) }) };
    const request = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers });
    const result: Upload = { status: undefined, answer_bytes: 0, answer_ended: false, uploaded_bytes: 0 };
    const deadline = setTimeout(() => reject(new Error(`the upload was neither answered nor closed: ${JSON.stringify(result)}`)), 20_000);
    // Settled once the answer has been read to its end, or cut: resolved at once when none came.
    let answer_closed: Promise<void> = Promise.resolve();
    request.on("response", (response) => {
      answer_closed = new Promise((closed) => response.once("close", () => closed()));
      result.status = response.statusCode;
      response.pause();
      setTimeout(() => response.resume(), read_delay_ms);
      response.on("data", (chunk: Buffer) => (result.answer_bytes += chunk.length));
      response.on("end", () => (result.answer_ended = true));
      response.on("error", () => undefined);
    });
    // EPIPE or ECONNRESET on the upload once the observer closed: expected, and what ends it.
    request.on("error", () => undefined);
    request.on("close", () => {
      // The answer's last bytes, already received, are read (late, by read_delay_ms) before its close.
      void answer_closed.then(() => {
        clearTimeout(deadline);
        resolve(result);
      });
    });
    const pump = () => {
      while (result.uploaded_bytes < upload_bytes && !request.destroyed) {
        result.uploaded_bytes += upload_chunk.length;
        if (!request.write(upload_chunk)) return void request.once("drain", pump);
      }
      if (!request.destroyed) request.end();
    };
    pump();
  });
}

describe("an upstream answering before the upload has arrived", () => {
  for (const chunked of [false, true]) {
    for (const read_delay_ms of [0, 500]) {
      it(`reaches the client whole, and the unread upload is not drained (${chunked ? "chunked" : "declared 64 MiB"}, answer read ${read_delay_ms} ms late)`, async () => {
        const source = await observerSource(h, upstream_url);
        const result = await upload(source.observer_url, source.observer_token, chunked, read_delay_ms);
        expect(result).toMatchObject({ status: 401, answer_bytes: answer_bytes, answer_ended: true });
        expect(result.uploaded_bytes).toBeLessThan(upload_bytes);
      }, 30_000);
    }
  }
});
