// The three ingest routes refuse before they read the body: a wrong or missing credential (an
// unknown or observer source id answers as a wrong credential does: unknown-ids.test.ts), the
// operator's upload to an unknown, disabled or observer source id, a disabled source's own API
// key, and (for the webhook) a Bursar-Signature header that is missing, malformed or outside the
// ±300 s tolerance are answered while the body is still coming, so no caller can make Bursar wait
// for and buffer up to 2 MiB first; past those checks, so is a body in a content coding (415). A well-formed signature is checked against the body whatever
// the id names, so the webhook answers an unknown id only once the body has come. After such an answer the
// connection stays usable for a body declared within the 2 MiB limit (Node discards it) and is
// closed for one chunked or declared over it. The checks run again once the body has arrived.

import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery_bytes_max } from "../../src/ingest/delivery.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { RawConnection } from "../support/raw-connection.js";
import { decisionsSource, harness, ndjson, operator_token, record, sourceKinds, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;
let other: DecisionsSource;
let disabled: DecisionsSource;
let observer_id: string;

beforeAll(async () => {
  h = await harness();
  ({ source, other, disabled, observer_id } = await sourceKinds(h, "auth-first"));
});
afterAll(async () => h.close());

/** What the reviewer measured: 2,000,000 bytes declared (within the 2 MiB limit), 10 sent. */
const declared_bytes = 2_000_000;
const first_bytes = '{"schema":';

const nowSeconds = () => Math.floor(h.clock().getTime() / 1000);
const wellFormed = (t = nowSeconds()) => `t=${t},v1=${"ab".repeat(32)}`;

interface Case {
  name: string;
  path: () => string;
  headers: () => Record<string, string>;
  status: number;
  code: string;
}

const webhook = (id: () => string) => () => `/ingest/${id()}`;
const events = (id: () => string) => () => `/api/v1/evidence-sources/${id()}/events`;
const upload = (id: () => string) => () => `/api/v1/evidence-sources/${id()}/upload`;
const bearerOf = (token: string) => () => ({ authorization: `Bearer ${token}` });
const gzip = { "content-encoding": "gzip" };

const cases: Case[] = [
  { name: "upload with a wrong operator token", path: upload(() => source.id), headers: bearerOf("wrong"), status: 401, code: "unauthorized" },
  { name: "upload without a token", path: upload(() => source.id), headers: () => ({}), status: 401, code: "unauthorized" },
  { name: "upload with the source's API key", path: upload(() => source.id), headers: () => bearerOf(source.api_key)(), status: 401, code: "unauthorized" },
  { name: "upload to an unknown id", path: upload(() => "src_unknown"), headers: bearerOf(operator_token), status: 404, code: "not_found" },
  { name: "upload to an observer source", path: upload(() => observer_id), headers: bearerOf(operator_token), status: 404, code: "not_found" },
  { name: "upload to a disabled source", path: upload(() => disabled.id), headers: bearerOf(operator_token), status: 403, code: "source_disabled" },
  { name: "events with a wrong API key", path: events(() => source.id), headers: bearerOf("wrong"), status: 401, code: "unauthorized" },
  { name: "events without a key", path: events(() => source.id), headers: () => ({}), status: 401, code: "unauthorized" },
  { name: "events with another source's API key", path: events(() => source.id), headers: () => bearerOf(other.api_key)(), status: 401, code: "unauthorized" },
  { name: "events to an unknown id", path: events(() => "src_unknown"), headers: bearerOf("wrong"), status: 401, code: "unauthorized" },
  { name: "events to an observer source", path: events(() => observer_id), headers: bearerOf("wrong"), status: 401, code: "unauthorized" },
  { name: "events to a disabled source, with a wrong key", path: events(() => disabled.id), headers: bearerOf("wrong"), status: 401, code: "unauthorized" },
  { name: "events to a disabled source, with its key", path: events(() => disabled.id), headers: () => bearerOf(disabled.api_key)(), status: 403, code: "source_disabled" },
  { name: "webhook without Bursar-Signature", path: webhook(() => source.id), headers: () => ({}), status: 401, code: "signature_missing" },
  { name: "webhook with a malformed Bursar-Signature", path: webhook(() => source.id), headers: () => ({ "bursar-signature": "t=abc,v1=zz" }), status: 401, code: "signature_malformed" },
  { name: "webhook with a t= 301 s old", path: webhook(() => source.id), headers: () => ({ "bursar-signature": wellFormed(nowSeconds() - 301) }), status: 401, code: "signature_stale" },
  { name: "webhook with a t= 301 s ahead", path: webhook(() => source.id), headers: () => ({ "bursar-signature": wellFormed(nowSeconds() + 301) }), status: 401, code: "signature_stale" },
  { name: "webhook to an unknown id without Bursar-Signature", path: webhook(() => "src_unknown"), headers: () => ({}), status: 401, code: "signature_missing" },
  { name: "webhook to an unknown id with a t= 301 s old", path: webhook(() => "src_unknown"), headers: () => ({ "bursar-signature": wellFormed(nowSeconds() - 301) }), status: 401, code: "signature_stale" },
  // A content coding is refused past the checks above, still before the body is read.
  { name: "upload in gzip", path: upload(() => source.id), headers: () => ({ ...bearerOf(operator_token)(), ...gzip }), status: 415, code: "unsupported_content_encoding" },
  { name: "events in gzip", path: events(() => source.id), headers: () => ({ ...bearerOf(source.api_key)(), ...gzip }), status: 415, code: "unsupported_content_encoding" },
  { name: "webhook in gzip with a current, well-formed Bursar-Signature", path: webhook(() => source.id), headers: () => ({ "bursar-signature": wellFormed(), ...gzip }), status: 415, code: "unsupported_content_encoding" },
  { name: "webhook to an unknown id in br", path: webhook(() => "src_unknown"), headers: () => ({ "bursar-signature": wellFormed(), "content-encoding": "br" }), status: 415, code: "unsupported_content_encoding" },
  { name: "events in gzip with a wrong API key", path: events(() => source.id), headers: () => ({ ...bearerOf("wrong")(), ...gzip }), status: 401, code: "unauthorized" },
  { name: "upload in gzip without a token", path: upload(() => source.id), headers: () => gzip, status: 401, code: "unauthorized" },
  { name: "webhook in gzip without Bursar-Signature", path: webhook(() => source.id), headers: () => gzip, status: 401, code: "signature_missing" },
];

function head(path: string, headers: Record<string, string>, framing: string): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return [`POST ${path} HTTP/1.1`, "content-type: application/x-ndjson", ...lines, framing].join("\n");
}

describe("the ingest routes answer before reading the body", () => {
  for (const { name, path, headers, status, code } of cases) {
    it(`${name}: ${status} ${code} with ${declared_bytes} bytes declared and 10 sent, keeping the connection`, async () => {
      const before = await h.treeSize();
      const connection = await RawConnection.open(h.url);
      try {
        connection.writeHead(head(path(), headers(), `content-length: ${declared_bytes}`));
        connection.write(first_bytes);
        const answer = await connection.response();
        expect({ status: answer.status, code: (JSON.parse(answer.body) as { error: { code: string } }).error.code, connection: answer.headers.connection }).toEqual({
          status,
          code,
          connection: "keep-alive",
        });
      } finally {
        connection.destroy();
      }
      expect(await h.treeSize()).toBe(before);
    });
  }

  it("answers the next request on the connection once the rest of the declared body has come (Node discards it)", async () => {
    const connection = await RawConnection.open(h.url);
    try {
      connection.writeHead(head(events(() => source.id)(), bearerOf("wrong")(), `content-length: ${declared_bytes}`));
      connection.write(first_bytes);
      expect((await connection.response()).status).toBe(401);
      connection.write(Buffer.alloc(declared_bytes - first_bytes.length, "x"));
      connection.writeHead("GET /healthz HTTP/1.1");
      const next = await connection.response(10_000);
      expect({ status: next.status, body: JSON.parse(next.body) as unknown, closed: connection.is_closed }).toEqual({ status: 200, body: { ok: true }, closed: false });
    } finally {
      connection.destroy();
    }
  }, 20_000);

  for (const [framing, label] of [
    ["transfer-encoding: chunked", "chunked"],
    [`content-length: ${delivery_bytes_max + 1}`, "declared one byte over 2 MiB"],
  ] as const) {
    it(`answers 401 and closes the connection to a body ${label} (it would otherwise be discarded for as long as it came)`, async () => {
      for (const path of [upload(() => source.id), events(() => source.id), webhook(() => source.id)]) {
        const connection = await RawConnection.open(h.url);
        try {
          connection.writeHead(head(path(), bearerOf("wrong")(), framing));
          connection.write(framing.startsWith("transfer") ? `a\r\n${first_bytes}\r\n` : first_bytes);
          const answer = await connection.response();
          expect({ path: path(), status: answer.status, connection: answer.headers.connection }).toEqual({ path: path(), status: 401, connection: "close" });
          await Promise.race([connection.closed, new Promise((_, reject) => setTimeout(() => reject(new Error("the connection stayed open")), 5_000))]);
        } finally {
          connection.destroy();
        }
      }
    }, 30_000);
  }

  it("answers 415 to an authenticated body in gzip declared over 2 MiB, before reading it, and closes the connection", async () => {
    const connection = await RawConnection.open(h.url);
    try {
      connection.writeHead(head(events(() => source.id)(), { ...bearerOf(source.api_key)(), ...gzip }, `content-length: ${delivery_bytes_max + 1}`));
      connection.write(first_bytes);
      const answer = await connection.response();
      expect({ status: answer.status, code: (JSON.parse(answer.body) as { error: { code: string } }).error.code, connection: answer.headers.connection }).toEqual({
        status: 415,
        code: "unsupported_content_encoding",
        connection: "close",
      });
    } finally {
      connection.destroy();
    }
  });

  it("still answers 413 to an authenticated body declared over 2 MiB, before reading it", async () => {
    const connection = await RawConnection.open(h.url);
    try {
      connection.writeHead(head(events(() => source.id)(), bearerOf(source.api_key)(), `content-length: ${delivery_bytes_max + 1}`));
      connection.write(first_bytes);
      const answer = await connection.response();
      expect({ status: answer.status, code: (JSON.parse(answer.body) as { error: { code: string } }).error.code }).toEqual({ status: 413, code: "body_too_large" });
    } finally {
      connection.destroy();
    }
  });
});

/**
 * Sends the head of a POST to `path` and resolves once the server reads its body: once a listener
 * takes its data, which happens only after the route's onRequest hooks let it pass.
 */
async function bodyAwaited(connection: RawConnection, path: string, request_head: string): Promise<void> {
  const arrived = new Promise<IncomingMessage>((resolve) => {
    const seen = (message: IncomingMessage) => {
      if (message.url !== path) return;
      h.app.server.off("request", seen);
      resolve(message);
    };
    h.app.server.on("request", seen);
  });
  connection.writeHead(request_head);
  const message = await arrived;
  const deadline = Date.now() + 10_000;
  while (message.listenerCount("data") === 0) {
    if (Date.now() > deadline) throw new Error("the server did not read the request's body");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("the checks run again once the body has arrived", () => {
  it("an API key whose rotation grace ended while the body was on the way is refused with 401, nothing stored", async () => {
    const rotating = await decisionsSource(h, "auth-first-rotating");
    const body = ndjson([record("evt_rotated_meanwhile")]);
    const path = `/api/v1/evidence-sources/${rotating.id}/events`;
    const connection = await RawConnection.open(h.url);
    try {
      await bodyAwaited(connection, path, head(path, bearerOf(rotating.api_key)(), `content-length: ${Buffer.byteLength(body)}`));
      expect((await h.api("POST", `/api/v1/evidence-sources/${rotating.id}/rotate`, { grace_seconds: 0 })).status).toBe(200);
      const before = await h.treeSize();
      connection.write(body);
      const answer = await connection.response();
      expect({ status: answer.status, body: JSON.parse(answer.body) as unknown }).toEqual({
        status: 401,
        body: { error: { code: "unauthorized", message: "the API key is not valid for this source" } },
      });
      expect(await h.treeSize()).toBe(before);
    } finally {
      connection.destroy();
    }
  });

  it("a webhook whose header passed is still refused when its HMAC does not match the body (signature_mismatch), and a valid one is stored", async () => {
    const body = ndjson([record("evt_signed_after_headers")]);
    const mismatch = await RawConnection.open(h.url);
    try {
      mismatch.writeHead(head(`/ingest/${source.id}`, { "bursar-signature": wellFormed() }, `content-length: ${Buffer.byteLength(body)}`));
      mismatch.write(body);
      const answer = await mismatch.response();
      expect({ status: answer.status, code: (JSON.parse(answer.body) as { error: { code: string } }).error.code }).toEqual({ status: 401, code: "signature_mismatch" });
    } finally {
      mismatch.destroy();
    }
    const signed = await RawConnection.open(h.url);
    try {
      const header = signatureHeader([source.signing_key], Buffer.from(body), h.clock());
      signed.writeHead(head(`/ingest/${source.id}`, { "bursar-signature": header }, `content-length: ${Buffer.byteLength(body)}`));
      signed.write(body);
      const answer = await signed.response();
      expect({ status: answer.status, written: (JSON.parse(answer.body) as { written: number }).written }).toEqual({ status: 200, written: 1 });
    } finally {
      signed.destroy();
    }
  });
});
