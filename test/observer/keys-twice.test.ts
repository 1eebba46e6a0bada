// A request body that writes a key twice in one object reaches the server untouched (the
// observer never blocks), and its calls' observer.call entries say so: JSON.parse kept the last
// value, as the SDK's server reads it and as the entry records it, but a server reading the
// first acted on other arguments than the entry shows.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harness, type Harness } from "../ingest/support.js";
import { LATEST_PROTOCOL_VERSION, observerSource, raw, rawSession, recorded } from "./support.js";
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

describe("a request body that writes a key twice", () => {
  it("is relayed as sent, and each of its calls' entries names the first key written twice; a body without one has no such field", async () => {
    const source = await observerSource(h, `${upstream.url}/mcp-json`);
    const token = { "x-bursar-observer-token": source.observer_token };
    const headers = { ...token, "mcp-session-id": await rawSession(source.observer_url, token), "mcp-protocol-version": LATEST_PROTOCOL_VERSION };
    const twice = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"amount":100,"amount":9000}}}';
    const answer = await raw(source.observer_url, "POST", headers, new TextEncoder().encode(twice));
    expect(answer.status).toBe(200);
    // The SDK's server read the last amount, as JSON.parse does.
    expect(answer.bytes.toString()).toContain("charged 9000");
    const plain = await raw(source.observer_url, "POST", headers, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "charge", arguments: { amount: 100 } } });
    expect(plain.status).toBe(200);

    const bodies = await recorded(h, source.id);
    expect(bodies.map((body) => [body.jsonrpc_id, body.args, body.key_written_twice])).toEqual([
      [1, { amount: 9000 }, "params.arguments.amount"],
      [2, { amount: 100 }, undefined],
    ]);
    expect(bodies[1]).not.toHaveProperty("key_written_twice");
  });
});
