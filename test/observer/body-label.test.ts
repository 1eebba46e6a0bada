// A request body's label (a charset, a Content-Encoding, a transfer coding before chunked) cannot
// keep its calls out of the evidence: the SDK's server reads every POST body as UTF-8 JSON and
// ignores both, so the observer reads it so too. Only bytes that are not UTF-8 JSON fall back to
// being counted in the gap, as many as the scan finds (at least one under such a label).

import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { gapCalls, LATEST_PROTOCOL_VERSION, observerSource, raw, rawRequest, rawSession, recorded, toolCall, type ObserverSourceCreated } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

let h: Harness;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream();
  h = await harness();
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});

/** A source in front of the SDK server's JSON twin, and the headers of a session opened through it. */
async function session(): Promise<{ source: ObserverSourceCreated; headers: Record<string, string> }> {
  const source = await observerSource(h, `${upstream.url}/mcp-json`);
  const token = { "x-bursar-observer-token": source.observer_token };
  const id = await rawSession(source.observer_url, token);
  return { source, headers: { ...token, "mcp-session-id": id, "mcp-protocol-version": LATEST_PROTOCOL_VERSION } };
}

/** The calls the gap entries count for this source, and their reasons. */
async function gap(source_id: string) {
  expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
  const bodies = (await h.entries("system.evidence_gap")).map((stored) => stored.entry.body);
  const mine = bodies.filter((body) => gapCalls(body, source_id) !== undefined);
  return { calls: mine.reduce((sum, body) => sum + gapCalls(body, source_id)!, 0), reasons: [...new Set(mine.flatMap((body) => body.reasons as string[]))] };
}

const batch = (ids: number[]) => ids.map((id) => toolCall(id, "charge", { amount: 1000 * id }));

describe("a request body labelled with another charset or a coding, its bytes UTF-8 JSON", () => {
  const labels: Array<[string, Record<string, string>]> = [
    ["charset=iso-8859-1", { "content-type": "application/json; charset=iso-8859-1" }],
    ["charset=utf-16le", { "content-type": "application/json; charset=utf-16le" }],
    ["Content-Encoding: gzip", { "content-encoding": "gzip" }],
    ["Content-Encoding: br", { "content-encoding": "br" }],
  ];
  for (const [label, extra] of labels) {
    it(`records each call the SDK server ran with its result, none in the gap (${label})`, async () => {
      const { source, headers } = await session();
      const answer = await raw(source.observer_url, "POST", { ...headers, ...extra }, batch([1, 2, 3, 4, 5]));
      expect(answer.status).toBe(200);
      const results = (JSON.parse(answer.bytes.toString()) as Array<{ result: { content: Array<{ text: string }> } }>).map((message) => message.result.content[0]!.text);
      expect(results).toEqual(["charged 1000", "charged 2000", "charged 3000", "charged 4000", "charged 5000"]);
      const bodies = await recorded(h, source.id);
      expect(bodies.map((body) => [body.jsonrpc_id, body.args, body.outcome])).toEqual([1, 2, 3, 4, 5].map((id) => [id, { amount: 1000 * id }, { type: "result", is_error: false }]));
      expect(await gap(source.id)).toEqual({ calls: 0, reasons: [] });
    });
  }

  it("records a call under a transfer coding before chunked (gzip, chunked) whose bytes are plain JSON", async () => {
    const { source, headers } = await session();
    const body = JSON.stringify(toolCall(7, "echo", { text: "coded" }));
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("");
    const sent = `POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}content-type: application/json\r\naccept: application/json, text/event-stream\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    expect(await rawRequest(h.url, sent)).toMatch(/^HTTP\/1\.1 200/);
    expect((await recorded(h, source.id)).map((recorded_body) => [recorded_body.jsonrpc_id, recorded_body.args])).toEqual([[7, { text: "coded" }]]);
    expect(await gap(source.id)).toEqual({ calls: 0, reasons: [] });
  });

  it("records a call in ISO-8859-1 with a byte that is not UTF-8 as the SDK server reads it (U+FFFD)", async () => {
    const { source, headers } = await session();
    const body = Buffer.from(JSON.stringify(toolCall(9, "echo", { text: "café" })), "latin1");
    const answer = await raw(source.observer_url, "POST", { ...headers, "content-type": "application/json; charset=iso-8859-1" }, body);
    expect(answer.bytes.toString()).toContain("caf\ufffd");
    expect((await recorded(h, source.id)).map((recorded_body) => recorded_body.args)).toEqual([{ text: "caf\ufffd" }]);
  });
});

describe("a request body labelled with a coding whose bytes are not UTF-8 JSON", () => {
  it("counts the calls the scan finds in the gap, not one for the whole body", async () => {
    const { source, headers } = await session();
    // Not JSON (a trailing comma), but its calls can be counted: the scan finds three.
    const body = Buffer.from(`${JSON.stringify(batch([1, 2, 3]))},`);
    await raw(source.observer_url, "POST", { ...headers, "content-encoding": "gzip" }, body);
    expect(await recorded(h, source.id)).toEqual([]);
    expect(await gap(source.id)).toEqual({ calls: 3, reasons: ["unparsed"] });
  });

  it("counts a compressed body as at least one call (its bytes say nothing), as before", async () => {
    const { source, headers } = await session();
    await raw(source.observer_url, "POST", { ...headers, "content-encoding": "gzip" }, gzipSync(JSON.stringify(batch([1, 2]))));
    expect(await recorded(h, source.id)).toEqual([]);
    expect(await gap(source.id)).toEqual({ calls: 1, reasons: ["unparsed"] });
  });

  it("counts a body in UTF-16 as at least one call, as before", async () => {
    const { source, headers } = await session();
    await raw(source.observer_url, "POST", { ...headers, "content-type": "application/json; charset=utf-16le" }, Buffer.from(JSON.stringify(batch([1, 2])), "utf16le"));
    expect(await recorded(h, source.id)).toEqual([]);
    expect(await gap(source.id)).toEqual({ calls: 1, reasons: ["unparsed"] });
  });
});
