import { getEventListeners, once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchWithTimeout } from "../../src/cli/commands/mcp-stdio.js";

/** What a signal holds for others: its abort listeners and the signals AbortSignal.any made from
 *  it, which Node 20 keeps an entry for as long as the signal lives. */
function held(signal: AbortSignal): number {
  const dependants = Object.getOwnPropertySymbols(signal).find((symbol) => symbol.description === "kDependantSignals");
  const made = dependants ? ((signal as unknown as Record<symbol, { size?: number } | undefined>)[dependants]?.size ?? 0) : 0;
  return getEventListeners(signal, "abort").length + made;
}

// The bridge's fetch: every exchange, body included, is bounded, and nothing it holds outlives
// the exchange on the transport's long-lived signal.
describe("mcp-stdio's fetch", () => {
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      if (request.url === "/json") {
        response.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s-1" });
        response.end('{"jsonrpc":"2.0","id":1,"result":{}}');
      } else if (request.url === "/accepted") {
        response.writeHead(202);
        response.end();
      } else if (request.url === "/no-content") {
        response.writeHead(204);
        response.end();
      } else if (request.url === "/stalls") {
        // Headers, part of a body, then nothing.
        response.writeHead(200, { "content-type": "application/json" });
        response.write('{"jsonrpc":');
      } else {
        response.writeHead(404, { "content-type": "text/plain" });
        response.end("no such route");
      }
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it("hands on status, headers, body and URL as they came", async () => {
    const fetch = fetchWithTimeout(5_000);
    const json = await fetch(`${base}/json`, { method: "POST", body: "{}" });
    expect([json.status, json.headers.get("mcp-session-id"), json.url, await json.text()]).toEqual([200, "s-1", `${base}/json`, '{"jsonrpc":"2.0","id":1,"result":{}}']);
    const missing = await fetch(`${base}/missing`);
    expect([missing.status, missing.ok, await missing.text()]).toEqual([404, false, "no such route"]);
    const accepted = await fetch(`${base}/accepted`, { method: "POST" });
    expect(accepted.status).toBe(202);
    await accepted.body?.cancel();
    expect((await fetch(`${base}/no-content`)).status).toBe(204);
  });

  it("leaves nothing on the transport's signal once each answer is read", async () => {
    const transport = new AbortController();
    const fetch = fetchWithTimeout(5_000);
    for (let i = 0; i < 200; i++) {
      const response = await fetch(`${base}/json`, { method: "POST", body: "{}", signal: transport.signal });
      await response.json();
    }
    const missing = await fetch(`${base}/missing`, { signal: transport.signal });
    await missing.text();
    // A body the SDK cancels unread (a notification's 202) lets go as well.
    const accepted = await fetch(`${base}/accepted`, { method: "POST", signal: transport.signal });
    await accepted.body?.cancel();
    expect(held(transport.signal)).toBe(0);
  });

  it("fails a body that stops coming with a TimeoutError, and a transport that closes aborts the read", async () => {
    const stalled = await fetchWithTimeout(300)(`${base}/stalls`, { method: "POST" });
    await expect(stalled.text()).rejects.toMatchObject({ name: "TimeoutError" });

    const transport = new AbortController();
    const reading = await fetchWithTimeout(60_000)(`${base}/stalls`, { method: "POST", signal: transport.signal });
    const text = reading.text();
    transport.abort();
    await expect(text).rejects.toMatchObject({ name: "AbortError" });
    expect(held(transport.signal)).toBe(0);
  });
});
