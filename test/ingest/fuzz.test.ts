// Random bodies and headers to the ingestion routes never produce a 5xx or a partial store:
// a 200 adds exactly the records it reports written, anything else adds nothing.

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
const record_like = fc.oneof(
  fc.constant(record("x")),
  fc.record({ schema: fc.constantFrom("bursar.gateway-decision/1", "nope"), event_id: fc.string({ maxLength: 20 }), decision: fc.string({ maxLength: 8 }), tool: fc.string({ maxLength: 8 }) }),
  fc.jsonValue({ maxDepth: 3 }),
);
const body = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(JSON.stringify(records))),
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(records.map((value) => JSON.stringify(value)).join("\r\n"))),
  fc.tuple(fc.uuid(), fc.constantFrom("allow", "deny", "approve"), fc.jsonValue({ maxDepth: 2 })).map(([id, decision, args]) =>
    Buffer.from(JSON.stringify(record(`evt_${id}`, { decision, args: typeof args === "object" && args !== null && !Array.isArray(args) ? args : { value: args } }))),
  ),
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
        const written = answer.status === 200 ? (JSON.parse(answer.text) as { written: number }).written : 0;
        expect(await h.treeSize()).toBe(before + written);
      }),
      { numRuns: 300 },
    );
  });
});
