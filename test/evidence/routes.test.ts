// The log's HTTP routes: public checkpoint and key, reader-only entries and proofs,
// 401 without a credential, 422 naming the bad parameter and its limit.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FastifyInstance } from "fastify";
import { checkConsistencyDocument, checkInclusionDocument, consistencyProofSchema, inclusionProofSchema } from "../../src/evidence/proof.js";
import { openCheckpoint, parseVerifierKey } from "../../src/evidence/note.js";
import { entries_page_bytes_max } from "../../src/evidence/store.js";
import { buildServer } from "../../src/server/app.js";
import { logRoutes } from "../../src/server/routes/log.js";
import { openTestLog, type TestLog } from "./support.js";

const reader = "Bearer auditor-token";
let t: TestLog;
let app: FastifyInstance;

beforeAll(async () => {
  t = await openTestLog();
  await t.driver.transaction((tx) =>
    t.log.appendMany(tx, Array.from({ length: 30 }, (_, n) => ({ kind: "gate.decision", source: "gate", body: { n } }))),
  );
  await t.log.checkpoint();
  app = await buildServer({ logger: false, plugins: [logRoutes({ log: t.log, authorizeReader: async (header) => header === reader })] });
});
afterAll(async () => app.close());

const get = (url: string, authorization?: string) => app.inject({ method: "GET", url, headers: authorization ? { authorization } : {} });

describe("public routes", () => {
  it("serves the latest signed checkpoint as text and the verifier key", async () => {
    const key = await get("/.well-known/bursar/log-key");
    expect(key.statusCode).toBe(200);
    expect(key.body.trim()).toBe(t.log.verifierKey);
    const checkpoint = await get("/api/v1/log/checkpoint");
    expect(checkpoint.headers["content-type"]).toMatch(/^text\/plain/);
    expect(openCheckpoint(checkpoint.body, parseVerifierKey(key.body.trim())).size).toBe(31);
  });
});

describe("reader routes", () => {
  it("answer 401 with no or a bad credential", async () => {
    for (const url of ["/api/v1/log/entries?start=0&end=2", "/api/v1/log/proof/inclusion?index=0&size=1", "/api/v1/log/proof/consistency?from=1&to=2"]) {
      expect((await get(url)).statusCode).toBe(401);
      const bad = await get(url, "Bearer wrong");
      expect(bad.statusCode).toBe(401);
      expect(bad.json()).toMatchObject({ error: { code: "unauthorized" } });
    }
  });

  it("page entries with their receipts, clamped to the tree", async () => {
    const page = await get("/api/v1/log/entries?start=28&end=40", reader);
    expect(page.statusCode).toBe(200);
    const body = page.json() as { start: number; end: number; tree_size: number; entries: { seq: number; receipt: { seq: number } }[] };
    expect(body).toMatchObject({ start: 28, end: 31, tree_size: 31 });
    expect(body.entries.map((e) => e.seq)).toEqual([28, 29, 30]);
    expect(body.entries[0]!.receipt.seq).toBe(28);
  });

  it("page from the tree size: empty (a tail polled before anything new came); past it, 422 naming start, not an end never sent", async () => {
    const page = await get("/api/v1/log/entries?start=31", reader);
    expect(page.statusCode).toBe(200);
    expect(page.json()).toMatchObject({ start: 31, end: 31, tree_size: 31, entries: [] });
    for (const start of [32, Number.MAX_SAFE_INTEGER]) {
      const past = await get(`/api/v1/log/entries?start=${start}`, reader);
      expect(past.statusCode).toBe(422);
      expect(past.json()).toMatchObject({ error: { code: "invalid_query", message: "start must be at most the tree size 31", details: { param: "start", limit: 31 } } });
    }
  });

  it("refuse bad parameters with 422 naming the parameter and limit", async () => {
    const cases: [string, string][] = [
      ["/api/v1/log/entries?start=0&end=1001", "end"],
      ["/api/v1/log/entries?start=-1", "start"],
      ["/api/v1/log/entries?start=abc", "start"],
      ["/api/v1/log/proof/inclusion?index=0&size=32", "size"],
      ["/api/v1/log/proof/inclusion?index=5&size=5", "index"],
      ["/api/v1/log/proof/inclusion?size=5", "index"],
      ["/api/v1/log/proof/consistency?from=0&to=5", "from"],
      ["/api/v1/log/proof/consistency?from=3&to=99", "to"],
      // Parameters the route does not take (a misspelt start read the log from 0).
      ["/api/v1/log/entries?begin=5", "begin"],
      ["/api/v1/log/proof/inclusion?index=0&size=5&leaf=ab", "leaf"],
      ["/api/v1/log/proof/consistency?first=1&to=5", "first"],
      // The public routes take none (a checkpoint "?size=5" is not the checkpoint of size 5).
      ["/api/v1/log/checkpoint?size=5", "size"],
      ["/.well-known/bursar/log-key?begin=5", "begin"],
    ];
    for (const [url, param] of cases) {
      const response = await get(url, reader);
      expect(response.statusCode, url).toBe(422);
      expect((response.json() as { error: { details: { param: string } } }).error.details.param, url).toBe(param);
    }
    const limited = (await get("/api/v1/log/entries?start=0&end=1001", reader)).json() as { error: { details: { limit: number } } };
    expect(limited.error.details.limit).toBe(1000);
    // Digits past the largest exact integer are out of range, and the answer says so.
    expect((await get("/api/v1/log/proof/inclusion?index=0&size=99999999999999999999", reader)).json()).toEqual({
      error: { code: "invalid_query", message: `size must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`, details: { param: "size", limit: Number.MAX_SAFE_INTEGER } },
    });
    expect((await get("/api/v1/log/entries?start=abc", reader)).json()).toMatchObject({ error: { message: "start must be a non-negative integer" } });
    expect((await get("/api/v1/log/checkpoint?size=5")).json()).toEqual({
      error: { code: "invalid_query", message: "size is not a parameter of this route; it takes none", details: { param: "size", taken: [] } },
    });
  });

  it("return proofs in exactly the documented shape, which verify offline", async () => {
    const verifier = parseVerifierKey(t.log.verifierKey);
    const inclusion = inclusionProofSchema.parse((await get("/api/v1/log/proof/inclusion?index=17&size=31", reader)).json());
    expect(checkInclusionDocument(inclusion, verifier)).toEqual({ ok: true });
    const consistency = consistencyProofSchema.parse((await get("/api/v1/log/proof/consistency?from=1&to=31", reader)).json());
    expect(checkConsistencyDocument(consistency, verifier)).toEqual({ ok: true, older: null, newer: null });
  });
});

describe("a page of large entries", () => {
  it(`stops once ${entries_page_bytes_max} bytes of entry text are reached, at least one entry, and says where in end`, async () => {
    const big = await openTestLog();
    const blob = "x".repeat(3_900_000);
    for (let n = 0; n < 6; n++) await big.driver.transaction((tx) => big.log.append(tx, { kind: "ingest.decision", source: "test", body: { n, blob } }));
    const pages = await buildServer({ logger: false, plugins: [logRoutes({ log: big.log, authorizeReader: async (header) => header === reader })] });
    try {
      const first = (await pages.inject({ method: "GET", url: "/api/v1/log/entries?start=0", headers: { authorization: reader } })).json();
      // Entry 0 is the genesis; four 3.9 MB entries fit under 16 MiB, a fifth would not.
      expect(first).toMatchObject({ start: 0, end: 5, tree_size: 7 });
      expect(first.entries.map((entry: { seq: number }) => entry.seq)).toEqual([0, 1, 2, 3, 4]);
      const rest = (await pages.inject({ method: "GET", url: "/api/v1/log/entries?start=5", headers: { authorization: reader } })).json();
      expect(rest).toMatchObject({ start: 5, end: 7 });
      expect(await big.log.entries(1, 2)).toHaveLength(1);
    } finally {
      await pages.close();
      await big.driver.close();
    }
  });
});
