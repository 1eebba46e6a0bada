// What the observer does over time, not per request: a disabled source's (or an expired
// token's) open streams are cut, a client gone during its token's look-up leaves nothing open,
// a call nobody answers is recorded as a timeout even when no other call comes, and a call the
// gateway gave up on is recorded as cancelled, not as a 502 the upstream never sent.

import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../provider/support.js";
import { harness, type Harness } from "../ingest/support.js";
import { LATEST_PROTOCOL_VERSION, observerSource, rawSession, toolCall } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

let h: Harness;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
  // Calls wait 2 s for their answer here, not 15 minutes.
  h = await harness({ sweep_ms: 20, pending_call_ttl_ms: 2_000 });
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});

/** A promise and the function that resolves it. */
function settlement(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

async function outcomes(source_id: string): Promise<unknown[]> {
  await h.evidence.observer.recorder.drain();
  return (await h.entries("observer.call")).filter((stored) => stored.entry.source === source_id).map((stored) => stored.entry.body.outcome);
}

describe("the observer over time", () => {
  it("cuts a disabled source's open GET stream", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp`);
    const headers = { "x-bursar-observer-token": source.observer_token };
    const session = await rawSession(source.observer_url, headers);
    const stream = await fetch(source.observer_url, {
      headers: { ...headers, accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION },
    });
    expect(stream.status).toBe(200);
    const reading = (async () => {
      const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
      try {
        while (!(await reader.read()).done);
        return "ended";
      } catch {
        return "cut";
      }
    })();
    expect((await h.api("POST", `/api/v1/evidence-sources/${source.id}/disable`)).status).toBe(200);
    expect(["ended", "cut"]).toContain(await reading);
  });

  it("opens nothing upstream, and leaves no open exchange, for a client that left while its token was looked up", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const sources = h.evidence.sources;
    const lookup = sources.observerByToken;
    // The look-up starts, the client leaves and the server sees it go, then the look-up answers.
    const started = settlement();
    const client_gone = settlement();
    const answered = settlement();
    sources.observerByToken = async (token) => {
      started.resolve();
      await client_gone.promise;
      try {
        return await lookup.call(sources, token);
      } finally {
        answered.resolve();
      }
    };
    try {
      const open_before = h.evidence.observer.exchanges_open;
      const seen_before = upstream.seen.length;
      const server_side_closed = new Promise<void>((resolve) => h.app.server.once("connection", (accepted: Socket) => accepted.once("close", () => resolve())));
      const body = JSON.stringify(toolCall(7, "echo", { text: "left" }));
      const socket = connect(Number(new URL(h.url).port), "127.0.0.1");
      socket.on("error", () => undefined);
      socket.write(`POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nx-bursar-observer-token: ${source.observer_token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
      await started.promise;
      socket.destroy();
      await server_side_closed;
      client_gone.resolve();
      await answered.promise;
      // The route goes on from the look-up's answer without further I/O: done by the next turn.
      await new Promise((resolve) => setImmediate(resolve));
      expect(h.evidence.observer.exchanges_open).toBe(open_before);
      expect(upstream.seen.length).toBe(seen_before);
    } finally {
      sources.observerByToken = lookup;
    }
  });

  it("records a call nobody answers as a timeout once its time is past (2 s here), with no other call coming", async () => {
    const { source, abort, done } = await slowCall(60_000);
    await waitFor(() => h.evidence.observer.correlator.size === 0, 10_000, "the sweep to record the call");
    expect(await outcomes(source.id)).toEqual([{ type: "no_response", reason: "timeout" }]);
    abort();
    await done;
  });

  it("records a call the gateway gave up on as cancelled, not as a 502 the upstream never sent", async () => {
    const { source, abort, done } = await slowCall(5_000);
    abort();
    await done;
    await waitFor(() => h.evidence.observer.correlator.size === 0, 5_000, "the cancelled call to be settled");
    expect(await outcomes(source.id)).toEqual([{ type: "no_response", reason: "cancelled" }]);
  });
});

/** A tools/call through a new observer source that the upstream answers after `delay_ms`, once it is pending. */
async function slowCall(delay_ms: number) {
  const source = await observerSource(h, `${upstream.url}/mcp-json`);
  const headers = { "x-bursar-observer-token": source.observer_token };
  const session = await rawSession(source.observer_url, headers);
  const controller = new AbortController();
  const done = fetch(source.observer_url, {
    method: "POST",
    signal: controller.signal,
    headers: { ...headers, accept: "application/json, text/event-stream", "content-type": "application/json", "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION },
    body: JSON.stringify(toolCall(7, "slow", { delay_ms })),
  }).catch(() => undefined);
  await waitFor(() => h.evidence.observer.correlator.size > 0, 5_000, "the call to be pending");
  return { source, abort: () => controller.abort(), done };
}
