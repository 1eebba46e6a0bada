// A body over its route's limit is answered 413 `body_too_large` naming the limit in bytes, in
// the message and as details.limit: the route's own limit when it sets one, else the server's.

import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { delivery_bytes_max } from "../../src/ingest/delivery.js";
import { body_limit_default_bytes, buildServer } from "../../src/server/app.js";
import { decisionsSource, deliver, harness, type DecisionsSource, type Harness } from "../ingest/support.js";

const small_limit_bytes = 64;

function tooLarge(limit: number) {
  return { error: { code: "body_too_large", message: `the request body is larger than ${limit} bytes`, details: { limit } } };
}

/** A JSON string value padded to exactly `bytes` bytes of body. */
function jsonOf(bytes: number): string {
  const body = `{"pad":"${"x".repeat(bytes - 10)}"}`;
  expect(Buffer.byteLength(body)).toBe(bytes);
  return body;
}

describe("a body over the limit", () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await buildServer({
      logger: false,
      plugins: [
        (scope) => {
          scope.post("/small", { bodyLimit: small_limit_bytes }, async () => ({ ok: true }));
          scope.post("/default", async () => ({ ok: true }));
        },
      ],
    });
  });
  afterAll(async () => app.close());

  const post = (url: string, payload: string) => app.inject({ method: "POST", url, headers: { "content-type": "application/json" }, payload });

  it("names the route's own limit: a body of exactly the limit is read, one byte more is 413", async () => {
    expect((await post("/small", jsonOf(small_limit_bytes))).statusCode).toBe(200);
    const refused = await post("/small", jsonOf(small_limit_bytes + 1));
    expect(refused.statusCode).toBe(413);
    expect(refused.json()).toEqual(tooLarge(small_limit_bytes));
  });

  it("names the server's limit on a route that sets none", async () => {
    expect((await post("/default", jsonOf(body_limit_default_bytes))).statusCode).toBe(200);
    const refused = await post("/default", jsonOf(body_limit_default_bytes + 1));
    expect(refused.statusCode).toBe(413);
    expect(refused.json()).toEqual(tooLarge(body_limit_default_bytes));
  });
});

describe("a delivery over the ingest routes' own limit", () => {
  let h: Harness;
  let source: DecisionsSource;
  beforeAll(async () => {
    h = await harness();
    source = await decisionsSource(h);
  });
  afterAll(async () => h.close());

  it(`is answered with that limit, ${delivery_bytes_max} bytes, not the server's`, async () => {
    const answer = await deliver(h, source, Buffer.alloc(delivery_bytes_max + 1, 0x7b));
    expect(answer.status).toBe(413);
    expect(answer.body).toEqual(tooLarge(delivery_bytes_max));
  });
});
