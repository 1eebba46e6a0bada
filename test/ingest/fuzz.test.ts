// Random bodies and headers to the ingestion routes never produce a 5xx or a partial store:
// a 200 adds exactly the records it reports written, anything else adds nothing. Bodies include
// records with lone surrogates in any field and deliveries with bytes that are not UTF-8.

import { isUtf8 } from "node:buffer";
import { request } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureHeader } from "../../src/ingest/signature.js";
import { decisionsSource, harness, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h);
});
afterAll(async () => h.close());

function post(path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  const url = new URL(path, h.url);
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: "POST", headers: { ...headers, "content-length": String(body.length) } }, (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }));
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

const token = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
const header_value = fc.string({ maxLength: 80 }).map((value) => value.replace(/[^\x20-\x7e]/g, ""));
/** One UTF-16 code unit of the surrogate range: alone it has no UTF-8 form (JSON.stringify writes it as \udXXX). */
const lone_surrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));
const text = fc.string({ unit: fc.oneof({ weight: 3, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) }, lone_surrogate), maxLength: 10 });
/** A valid record but for one field (or an args key or value) of text that may hold lone surrogates. */
const odd_record = fc.tuple(fc.uuid(), fc.constantFrom("reason", "tool", "event_id", "agent", "args", "args key"), text).map(([id, where, value]) => {
  if (where === "agent") return record(`evt_${id}`, { agent: { id: value, type: "agent" } });
  if (where === "args") return record(`evt_${id}`, { args: { nested: [value] } });
  if (where === "args key") return record(`evt_${id}`, { args: { [value]: 1 } });
  return record(`evt_${id}`, { [where]: value });
});
const record_like = fc.oneof(
  fc.constant(record("x")),
  fc.record({ schema: fc.constantFrom("bursar.gateway-decision/1", "nope"), event_id: fc.string({ maxLength: 20 }), decision: fc.string({ maxLength: 8 }), tool: fc.string({ maxLength: 8 }) }),
  fc.jsonValue({ maxDepth: 3 }),
  odd_record,
);
const json_body = fc.oneof(
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(JSON.stringify(records))),
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(records.map((value) => JSON.stringify(value)).join("\r\n"))),
  fc.tuple(fc.uuid(), fc.constantFrom("allow", "deny", "approve"), fc.jsonValue({ maxDepth: 2 })).map(([id, decision, args]) =>
    Buffer.from(JSON.stringify(record(`evt_${id}`, { decision, args: typeof args === "object" && args !== null && !Array.isArray(args) ? args : { value: args } }))),
  ),
  odd_record.map((value) => Buffer.from(JSON.stringify(value))),
);
/** Bytes that are not UTF-8: a stray continuation, an overlong, an encoded surrogate, past U+10FFFF, cut short, never used; or any. */
const bad_utf8 = fc.oneof(
  fc.constantFrom([0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xff], [0xfe]),
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((bytes) => [...bytes]),
);
const body = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  json_body,
  // A delivery that would be valid JSON, with bytes that are not UTF-8 put in anywhere.
  fc.tuple(json_body, bad_utf8, fc.nat()).map(([bytes, bad, at]) => {
    const cut = at % (bytes.length + 1);
    return Buffer.concat([bytes.subarray(0, cut), Buffer.from(bad), bytes.subarray(cut)]);
  }),
);

describe("fuzzing the ingestion routes", () => {
  it("never answers 5xx and never stores part of a delivery", async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.dictionary(token, header_value, { maxKeys: 4 }), fc.constantFrom("signed", "unsigned", "garbled", "api", "upload"), async (bytes, extra, mode) => {
        const headers: Record<string, string> = { ...extra };
        delete headers["content-length"];
        delete headers["transfer-encoding"];
        delete headers.host;
        delete headers.expect;
        delete headers.connection;
        if (mode === "signed") headers["bursar-signature"] = signatureHeader([source.signing_key], bytes, h.clock());
        if (mode === "garbled") headers["bursar-signature"] = extra[Object.keys(extra)[0] ?? ""] ?? "t=1,v1=zz";
        if (mode === "api") headers.authorization = `Bearer ${source.api_key}`;
        if (mode === "upload") headers.authorization = "Bearer ingest-operator-token-0123456789";
        const path = mode === "api" ? `/api/v1/evidence-sources/${source.id}/events` : mode === "upload" ? `/api/v1/evidence-sources/${source.id}/upload` : `/ingest/${source.id}`;
        const before = await h.treeSize();
        const answer = await post(path, headers, bytes);
        expect(answer.status, answer.text).toBeLessThan(500);
        // Bytes that are not UTF-8 are never stored (they would be stored as U+FFFD, not as hashed).
        if (answer.status === 200) expect(isUtf8(bytes)).toBe(true);
        const written = answer.status === 200 ? (JSON.parse(answer.text) as { written: number }).written : 0;
        expect(await h.treeSize()).toBe(before + written);
      }),
      { numRuns: 300 },
    );
  });
});
