// What the ingest routes take as a body's bytes. A Content-Encoding other than identity is refused
// (415) on all three routes, whether the bytes are compressed or only labelled so: Bursar does not
// decompress. A byte order mark is refused on the signed webhook and the API push, whose records
// are hashed as received, with an answer that names it; the operator's upload of a file's contents
// leaves out one at its start, as bursar send-decisions does, so the records hash alike both ways.

import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/evidence/index.js";
import { decisionsSource, harness, ingest_routes, ndjson, postDelivery, record, type DecisionsSource, type Harness, type IngestRoute } from "./support.js";

let h: Harness;
let source: DecisionsSource;

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h, "body-bytes");
});
afterAll(async () => h.close());


const post = (route: IngestRoute, body: Buffer, headers: Record<string, string> = {}) => postDelivery(h, source, route, body, headers);

async function refused(route: IngestRoute, body: Buffer, headers: Record<string, string> = {}) {
  const before = await h.treeSize();
  const answer = await post(route, body, headers);
  expect(await h.treeSize()).toBe(before);
  return answer;
}

const byte_order_mark = Buffer.from([0xef, 0xbb, 0xbf]);
let next_id = 0;
const fresh = (prefix: string) => `evt_${prefix}_${next_id++}`;

describe("Content-Encoding", () => {
  for (const route of ingest_routes) {
    it(`${route}: refuses gzip, signed or not over the compressed bytes, with 415 unsupported_content_encoding and stores nothing`, async () => {
      const compressed = gzipSync(Buffer.from(ndjson([record(fresh("gz"))])));
      const answer = await refused(route, compressed, { "content-encoding": "gzip" });
      expect({ status: answer.status, code: answer.body.error.code, accept: answer.headers.get("accept-encoding") }).toEqual({
        status: 415,
        code: "unsupported_content_encoding",
        accept: "identity",
      });
      expect(answer.body.error.message).toBe("Content-Encoding gzip is not accepted; send the body uncompressed, without a Content-Encoding");
    });

    it(`${route}: refuses plain JSON labelled with a coding, however written`, async () => {
      for (const coding of ["gzip", "GZIP", "br", "deflate", "identity, gzip", "x-anything"]) {
        const answer = await refused(route, Buffer.from(ndjson([record(fresh("label"))])), { "content-encoding": coding });
        expect({ coding, status: answer.status, code: answer.body.error?.code }).toEqual({ coding, status: 415, code: "unsupported_content_encoding" });
      }
    });

    it(`${route}: takes a body with no coding, identity in any case, or an empty header`, async () => {
      const codings: Array<Record<string, string>> = [{}, { "content-encoding": "identity" }, { "content-encoding": "Identity" }, { "content-encoding": "" }];
      for (const headers of codings) {
        const answer = await post(route, Buffer.from(ndjson([record(fresh("identity"))])), headers);
        expect({ headers, status: answer.status, written: answer.body.written }).toEqual({ headers, status: 200, written: 1 });
      }
    });
  }
});

describe("a byte order mark", () => {
  for (const route of ["webhook", "events"] as const) {
    it(`${route}: refuses a delivery that starts with one, in every form, with 400 byte_order_mark naming it and what to do`, async () => {
      const line = JSON.stringify(record(fresh("bom")));
      for (const body of [line, `${line}\n`, `${line}\n${JSON.stringify(record(fresh("bom")))}\n`, `[${line}]`, JSON.stringify(record(fresh("bom")), null, 2)]) {
        const answer = await refused(route, Buffer.concat([byte_order_mark, Buffer.from(body)]));
        expect({ status: answer.status, code: answer.body.error.code, details: answer.body.error.details }).toEqual({ status: 400, code: "byte_order_mark", details: { offset: 0 } });
        expect(answer.body.error.message).toBe(
          "the delivery starts with a UTF-8 byte order mark (bytes EF BB BF, U+FEFF) at byte 0; send UTF-8 without a byte order mark (bursar send-decisions leaves out the one a file starts with)",
        );
      }
    });
  }

  it("upload: leaves out one at the start of the file, so each record hashes as without it", async () => {
    const lines = [JSON.stringify(record(fresh("bom_upload"))), JSON.stringify(record(fresh("bom_upload")))];
    const answer = await post("upload", Buffer.concat([byte_order_mark, Buffer.from(`${lines.join("\r\n")}\r\n`)]));
    expect({ status: answer.status, written: answer.body.written }).toEqual({ status: 200, written: 2 });
    expect(answer.body.receipt.records.map((listed: { sha256: string }) => listed.sha256)).toEqual(lines.map((line) => sha256Hex(line)));
    const object = JSON.stringify(record(fresh("bom_upload")), null, 2);
    const single = await post("upload", Buffer.concat([byte_order_mark, Buffer.from(object)]));
    expect({ status: single.status, sha256: single.body.receipt?.records[0].sha256 }).toEqual({ status: 200, sha256: sha256Hex(object) });
  });

  it("upload: refuses a second one at the start, as the webhook refuses the first", async () => {
    const answer = await refused("upload", Buffer.concat([byte_order_mark, byte_order_mark, Buffer.from(ndjson([record(fresh("bom_twice"))]))]));
    expect({ status: answer.status, code: answer.body.error.code }).toEqual({ status: 400, code: "byte_order_mark" });
  });

  for (const route of ingest_routes) {
    it(`${route}: names one that starts a later line (files joined by cat) as that record's problem`, async () => {
      const body = Buffer.concat([Buffer.from(ndjson([record(fresh("bom_line"))])), byte_order_mark, Buffer.from(ndjson([record(fresh("bom_line"))]))]);
      const answer = await refused(route, body);
      expect({ status: answer.status, problems: answer.body.error.details.problems }).toEqual({
        status: 422,
        problems: [{ index: 1, field: "(record)", message: "not valid JSON: it starts with a byte order mark (U+FEFF); send UTF-8 without a byte order mark (bursar send-decisions leaves out the one a file starts with)" }],
      });
    });
  }
});
