// GET /api/v1/log/entries answers at most entries_pages_in_flight_max pages at once, process-wide:
// readers that send a request and never read its page held ~33 MB each, without bound. The next
// page is refused 503 `busy` with Retry-After before the log is read; a place is given back once,
// when its answer is done or its connection gone, on every path (errors, readers that leave).

import { connect, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FastifyInstance } from "fastify";
import type { EvidenceLog, StoredEntry } from "../../src/evidence/index.js";
import { buildServer, type RoutePlugin } from "../../src/server/app.js";
import { createMetrics } from "../../src/server/metrics.js";
import { entries_busy_retry_after_seconds, entries_pages_in_flight_max, entriesPagesInFlight, logRoutes } from "../../src/server/routes/log.js";
import { openTestLog, type TestLog } from "./support.js";

const reader = "Bearer auditor-token";
/** Two entries of this much text make a page far past what loopback buffers take from a reader that does not read. */
const blob_chars = 3_000_000;
/** How long a test waits for a place to be given back, polling: a bound, not a timing claim. */
const settle_ms_max = 10_000;

let t: TestLog;

beforeAll(async () => {
  t = await openTestLog();
  for (let n = 0; n < 2; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "ingest.decision", source: "test", body: { n, blob: "x".repeat(blob_chars) } }));
  }
  await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { small: true } }));
  await t.log.checkpoint();
});
afterAll(async () => t.driver.close());

interface Listening {
  app: FastifyInstance;
  url: string;
}

async function listen(log: EvidenceLog, also: RoutePlugin[] = [], page_send_ms_max?: number): Promise<Listening> {
  const routes = logRoutes({ log, authorizeReader: async (header) => header === reader, ...(page_send_ms_max === undefined ? {} : { page_send_ms_max }) });
  const app = await buildServer({ logger: false, plugins: [routes, ...also] });
  await app.listen({ port: 0, host: "127.0.0.1" });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

/** A connection that sends `paths` (pipelined, one after another) and never reads: its socket is paused before any byte arrives. */
async function stalledRequest(url: string, ...paths: string[]): Promise<Socket> {
  const { port } = new URL(url);
  const socket = connect({ host: "127.0.0.1", port: Number(port) });
  socket.pause();
  socket.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(paths.map((path) => `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${reader}\r\n\r\n`).join(""));
  return socket;
}

async function get(url: string, path: string): Promise<{ status: number; retry_after: string | null; body: Record<string, unknown> }> {
  const response = await fetch(`${url}${path}`, { headers: { authorization: reader } });
  return { status: response.status, retry_after: response.headers.get("retry-after"), body: (await response.json()) as Record<string, unknown> };
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + settle_ms_max;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${settle_ms_max} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function expectBusy(answer: Awaited<ReturnType<typeof get>>): void {
  expect(answer.status).toBe(503);
  expect(answer.retry_after).toBe(String(entries_busy_retry_after_seconds));
  expect(answer.body).toEqual({ error: { code: "busy", message: expect.stringContaining("ask again in 1 s"), details: { limit: entries_pages_in_flight_max } } });
}

/** The log, its entries (or, when told, its tree size: before a page is begun) held until `open()`, or failing when told to. */
function gatedLog(log: EvidenceLog, hold: "entries" | "treeSize" = "entries"): { log: EvidenceLog; open(): void; fail: { on: boolean }; waiting(): number } {
  let open = (): void => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const fail = { on: false };
  let waiting = 0;
  const held = async <T>(work: () => Promise<T>): Promise<T> => {
    waiting += 1;
    await gate;
    waiting -= 1;
    return work();
  };
  const gated = Object.create(log) as EvidenceLog;
  gated.entries = async (start: number, end: number): Promise<StoredEntry[]> => {
    if (fail.on) throw new Error("the database went away");
    return hold === "entries" ? held(() => log.entries(start, end)) : log.entries(start, end);
  };
  if (hold === "treeSize") gated.treeSize = async () => held(() => log.treeSize());
  return { log: gated, open: () => open(), fail, waiting: () => waiting };
}

describe(`at most ${entries_pages_in_flight_max} pages of entries in flight`, () => {
  it(`refuses the next page 503 busy with Retry-After while ${entries_pages_in_flight_max} large pages sit unread, and answers again once their readers are gone`, async () => {
    expect(entries_pages_in_flight_max).toBe(8);
    let built = 0;
    // Counts pages handed to their connections: how the test knows all are in flight, on old code too.
    const server = await listen(t.log, [
      (app) => {
        app.addHook("onSend", async (request) => {
          if (request.url.startsWith("/api/v1/log/entries")) built += 1;
        });
      },
    ]);
    const stalled: Socket[] = [];
    try {
      // Pages of two ~3 MB entries each (seq 1 and 2): each stays in flight against its reader.
      for (let n = 0; n < entries_pages_in_flight_max; n++) stalled.push(await stalledRequest(server.url, "/api/v1/log/entries?start=1&end=3"));
      await until(`${entries_pages_in_flight_max} pages built`, () => built === entries_pages_in_flight_max);
      expectBusy(await get(server.url, "/api/v1/log/entries?start=1&end=3"));
      // A small page reads the log too, and waits its turn as well; the place is what is bounded.
      expectBusy(await get(server.url, "/api/v1/log/entries?start=3"));
      expect(entriesPagesInFlight()).toBe(entries_pages_in_flight_max);
      // An operator sees it in /metrics.
      const metrics = createMetrics();
      expect(await metrics.registry.getSingleMetricAsString("bursar_log_pages_in_flight")).toMatch(new RegExp(`^bursar_log_pages_in_flight ${entries_pages_in_flight_max}$`, "m"));
      // Not counted: an empty page (a tail polled at the tree size) and the proofs.
      expect((await get(server.url, "/api/v1/log/entries?start=4")).body).toMatchObject({ start: 4, end: 4, tree_size: 4, entries: [] });
      expect((await get(server.url, "/api/v1/log/proof/inclusion?index=1&size=4")).status).toBe(200);

      for (const socket of stalled.splice(0)) socket.destroy();
      await until("every place given back", () => entriesPagesInFlight() === 0);
      const page = await get(server.url, "/api/v1/log/entries?start=1&end=3");
      expect(page.status).toBe(200);
      expect(page.body).toMatchObject({ start: 1, end: 3, tree_size: 4 });
      // Given back at the answer's 'finish', which may come a turn after its reader has it all.
      await until("the page's place given back", () => entriesPagesInFlight() === 0);
    } finally {
      for (const socket of stalled) socket.destroy();
      await server.app.close();
    }
  });

  it("gives a place back exactly once: for a reader that leaves while its page is read, and for a page that fails", async () => {
    const gated = gatedLog(t.log);
    const server = await listen(gated.log);
    const leaving: Socket[] = [];
    try {
      for (let n = 0; n < entries_pages_in_flight_max; n++) leaving.push(await stalledRequest(server.url, "/api/v1/log/entries?start=3"));
      await until(`${entries_pages_in_flight_max} places taken`, () => entriesPagesInFlight() === entries_pages_in_flight_max);
      expectBusy(await get(server.url, "/api/v1/log/entries?start=3"));
      // The readers leave while their pages are being read: the close gives each place back, and
      // the page finished later (sent to no one) gives back nothing more.
      for (const socket of leaving.splice(0)) socket.destroy();
      await until("places of readers gone given back", () => entriesPagesInFlight() === 0);
      gated.open();
      const page = await get(server.url, "/api/v1/log/entries?start=3");
      expect(page.status).toBe(200);
      expect(entriesPagesInFlight()).toBe(0);

      // Pages that fail, more of them than there are places: each 500 gives its place back.
      gated.fail.on = true;
      for (let n = 0; n < entries_pages_in_flight_max + 2; n++) {
        expect((await get(server.url, "/api/v1/log/entries?start=3")).status).toBe(500);
      }
      expect(entriesPagesInFlight()).toBe(0);
      gated.fail.on = false;
      expect((await get(server.url, "/api/v1/log/entries?start=0")).status).toBe(200);
      // Answered through inject too (how the other route tests ask): no place is kept.
      expect((await server.app.inject({ method: "GET", url: "/api/v1/log/entries?start=1", headers: { authorization: reader } })).statusCode).toBe(200);
      await until("the injected page's place given back", () => entriesPagesInFlight() === 0);
    } finally {
      for (const socket of leaving) socket.destroy();
      gated.open();
      await server.app.close();
    }
  });

  it("gives back the places of pipelined requests queued behind an unread page when their connection closes", async () => {
    const gated = gatedLog(t.log);
    const server = await listen(gated.log);
    try {
      // Three pages asked on one connection: the second and third wait behind the first, and Node
      // never starts their responses, so only the socket's close says they are gone.
      const pipelined = await stalledRequest(server.url, "/api/v1/log/entries?start=1&end=3", "/api/v1/log/entries?start=3", "/api/v1/log/entries?start=3");
      await until("three places taken", () => entriesPagesInFlight() === 3);
      gated.open();
      pipelined.destroy();
      await until("every place given back", () => entriesPagesInFlight() === 0);
    } finally {
      gated.open();
      await server.app.close();
    }
  });

  it("closes the connection of a reader that has not taken its page within the send deadline, and gives its place back", async () => {
    const server = await listen(t.log, [], 300);
    const stalled: Socket[] = [];
    try {
      for (let n = 0; n < entries_pages_in_flight_max; n++) stalled.push(await stalledRequest(server.url, "/api/v1/log/entries?start=1&end=3"));
      // Past the deadline the server closes each unread page's connection, and its place is free
      // again (the readers, paused, still hold their ends open).
      await until("every place given back", () => entriesPagesInFlight() === 0);
      expect((await get(server.url, "/api/v1/log/entries?start=1&end=3")).status).toBe(200);
    } finally {
      for (const socket of stalled) socket.destroy();
      await server.app.close();
    }
  });

  it("takes no place for a reader gone before its page is begun (its close has fired already)", async () => {
    const gated = gatedLog(t.log, "treeSize");
    let closed = 0;
    const server = await listen(gated.log, [
      (app) => {
        app.addHook("onRequest", async (_request, reply) => {
          reply.raw.once("close", () => (closed += 1));
        });
      },
    ]);
    try {
      const gone = await stalledRequest(server.url, "/api/v1/log/entries?start=1");
      await until("the request reached the log", () => gated.waiting() === 1);
      gone.destroy();
      await until("the server saw the reader go", () => closed === 1);
      gated.open();
      await until("the request was let through", () => gated.waiting() === 0);
      const page = await get(server.url, "/api/v1/log/entries?start=3");
      expect(page.status).toBe(200);
      expect(entriesPagesInFlight()).toBe(0);
    } finally {
      gated.open();
      await server.app.close();
    }
  });
});
