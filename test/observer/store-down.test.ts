// Evidence writing off the critical path: with the evidence store stopped every call still
// goes through; when it is back, a system.evidence_gap entry says how many calls went
// unrecorded and when, and /metrics counted them. With the database failing, or held by another
// process's write lock, tokens already seen keep their source, so traffic still flows.

import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppendInput } from "../../src/evidence/index.js";
import type { SqlDriver, SqlTx } from "../../src/ledger/driver.js";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import { SecretSealer } from "../../src/sources/sealed.js";
import { observer_cache_entries_max, observer_cache_ttl_ms, observer_lookup_wait_ms, SourceStore } from "../../src/sources/store.js";
import { harness, master_key, type Harness } from "../ingest/support.js";
import { LATEST_PROTOCOL_VERSION, observerSource, raw, rawSession, sdkClient, StoppableStore, toolCall, type ObserverSourceCreated } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

const queue_length_max = 3;
let h: Harness;
let upstream: Upstream;
let store: StoppableStore;
let source: ObserverSourceCreated;

beforeAll(async () => {
  upstream = await startUpstream();
  let current: Harness | undefined;
  const placeholder = { append: (inputs: readonly AppendInput[]) => store.append(inputs) };
  h = await harness({ sink: placeholder, queue_length_max, retry_delay_ms: 50 });
  current = h;
  store = new StoppableStore(h.db, () => current!);
  store.start();
  source = await observerSource(h, `${upstream.url}/mcp`);
});
afterAll(async () => {
  await store.stop();
  await h.close();
  await upstream.close();
});

describe("when the evidence store stops", () => {
  it("does not break a single call, and reports the unrecorded calls once the store is back", async () => {
    const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token });
    await client.callTool({ name: "echo", arguments: { text: "before" } });
    await h.evidence.observer.recorder.drain();
    await store.stop();
    const total = 10;
    for (let i = 0; i < total; i++) {
      const result = await client.callTool({ name: "echo", arguments: { text: `during ${i}` } });
      expect(result.content).toEqual([{ type: "text", text: `during ${i}` }]);
    }
    await client.close();
    const unrecorded = total - queue_length_max;
    expect(h.evidence.observer.recorder.pending).toBe(queue_length_max);
    expect(h.evidence.observer.recorder.unrecorded_pending).toBe(unrecorded);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain(`bursar_evidence_gap_calls_total{reason="queue_full"} ${unrecorded}`);

    store.start();
    expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
    const entries = await h.entries();
    const gap = entries.filter((stored) => stored.entry.kind === "system.evidence_gap");
    expect(gap).toHaveLength(1);
    expect(gap[0]!.entry.body).toMatchObject({ unrecorded_calls: unrecorded, reasons: ["queue_full"], by_source: [{ source_id: source.id, calls: unrecorded }] });
    expect(typeof gap[0]!.entry.body.first_missed_at).toBe("string");
    const texts = entries.filter((stored) => stored.entry.kind === "observer.call").map((stored) => (stored.entry.body.args as { text: string }).text);
    expect(texts).toEqual(["before", "during 0", "during 1", "during 2"]);
    const gap_seq = gap[0]!.seq;
    expect(entries.find((stored) => (stored.entry.body.args as { text?: string } | undefined)?.text === "during 0")!.seq).toBeGreaterThan(gap_seq);
  });
});

/** Poisons the driver the way a failed COMMIT does (a full disk, here a deferred foreign key): it then refuses all work. */
async function failCommit(driver: SqlDriver): Promise<void> {
  await driver.transaction(async (tx) => {
    await tx.run("CREATE TABLE poison_parent (id INTEGER PRIMARY KEY)");
    await tx.run("CREATE TABLE poison_child (parent_id INTEGER REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED)");
  });
  await expect(driver.transaction((tx) => tx.run("INSERT INTO poison_child (parent_id) VALUES (1)"))).rejects.toThrow(/FOREIGN KEY/);
  await expect(driver.read((tx) => tx.get("SELECT 1 AS one"))).rejects.toThrow(/refuses further work/);
}

describe("when the database refuses all work", () => {
  it("keeps relaying for a token already seen after its cache entry expires, and refuses an unknown one", async () => {
    const failing = await harness({ retry_delay_ms: 50 });
    try {
      const observed = await observerSource(failing, `${upstream.url}/mcp-json`);
      const session = await rawSession(`${upstream.url}/mcp-json`);
      const headers = { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION, "x-bursar-observer-token": observed.observer_token };
      expect((await raw(observed.observer_url, "POST", headers, toolCall(1, "echo", { text: "before" }))).status).toBe(200);

      await failCommit(failing.bursar.driver);
      for (let i = 0; i < 3; i++) {
        failing.clock.advance(observer_cache_ttl_ms + 1_000);
        const answer = await raw(observed.observer_url, "POST", headers, toolCall(2 + i, "echo", { text: `during ${i}` }));
        expect(answer.status).toBe(200);
        expect(answer.bytes.toString()).toContain(`during ${i}`);
      }
      const before = upstream.seen.length;
      const unknown = await raw(observed.observer_url, "POST", { ...headers, "x-bursar-observer-token": "bsr_obs_never_issued" }, toolCall(9, "echo", {}));
      expect(unknown.status).toBe(503);
      expect(JSON.parse(unknown.bytes.toString())).toMatchObject({ error: { code: "store_unavailable" } });
      expect(upstream.seen.length).toBe(before);
    } finally {
      await failing.close();
    }
  });
});

/** A driver over the harness's database file that the test closes (real errors: the connection is gone) and reopens. */
class ReopenableDriver implements SqlDriver {
  readonly dialect = "sqlite" as const;
  private driver: SqliteDriver;
  constructor(private readonly path: string) {
    this.driver = new SqliteDriver({ path });
  }
  async stop(): Promise<void> {
    await this.driver.close();
  }
  start(): void {
    this.driver = new SqliteDriver({ path: this.path });
  }
  transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.driver.transaction(work);
  }
  read<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.driver.read(work);
  }
  migrate(): Promise<number[]> {
    throw new Error("not used");
  }
  close(): Promise<void> {
    return this.driver.close();
  }
}

describe("an observer token lookup while the database is unreachable", () => {
  it("serves the last source seen, and stops serving a source disabled meanwhile once the database answers again", async () => {
    const driver = new ReopenableDriver(h.db);
    // A second instance on the same database, as when several Bursar processes share one.
    const instance = new SourceStore({ driver, log: h.bursar.log, sealer: new SecretSealer(master_key), clock: h.clock });
    try {
      const observed = await observerSource(h, `${upstream.url}/mcp-json`);
      expect((await instance.observerByToken(observed.observer_token))?.source_id).toBe(observed.id);

      await driver.stop();
      h.clock.advance(observer_cache_ttl_ms + 1_000);
      expect((await instance.observerByToken(observed.observer_token))?.source_id).toBe(observed.id);
      await expect(instance.observerByToken("bsr_obs_never_issued")).rejects.toThrow();

      // Random tokens looked up meanwhile do not push the valid one out of the cache.
      driver.start();
      for (let lookup = 0; lookup < observer_cache_entries_max + 100; lookup++) expect(await instance.observerByToken(`bsr_obs_random_${lookup}`)).toBeNull();
      await driver.stop();
      h.clock.advance(observer_cache_ttl_ms + 1_000);
      expect((await instance.observerByToken(observed.observer_token))?.source_id).toBe(observed.id);

      expect((await h.api("POST", `/api/v1/evidence-sources/${observed.id}/disable`)).status).toBe(200);
      driver.start();
      h.clock.advance(observer_cache_ttl_ms + 1_000);
      expect(await instance.observerByToken(observed.observer_token)).toBeNull();
    } finally {
      await driver.close();
    }
  });
});

/**
 * A second SourceStore on the harness's database with a token it has looked up once, and a way
 * to hold the database's write lock from another connection (a bursar migrate, say): this
 * instance's write then queues behind the lock, and the driver's reads behind that write.
 * `write` settles with what that write did once the lock is let go.
 */
async function heldStore() {
  const driver = new SqliteDriver({ path: h.db });
  const instance = new SourceStore({ driver, log: h.bursar.log, sealer: new SecretSealer(master_key), clock: h.clock });
  const seen = await observerSource(h, `${upstream.url}/mcp-json`);
  expect((await instance.observerByToken(seen.observer_token))?.source_id).toBe(seen.id);
  const other = new Database(h.db);
  other.exec("BEGIN IMMEDIATE");
  const write = driver.transaction(async () => undefined).then(
    () => "the write went through",
    () => "the write gave up",
  );
  const letGo = () => {
    other.exec("ROLLBACK");
    other.close();
  };
  return { driver, instance, seen, write, letGo };
}

describe("an observer token lookup while another process holds the database's write lock", () => {
  it("does not wait for the lock: a token seen before goes through on its last answer, an unseen one is refused for now and known once the lock is gone", async () => {
    const unseen = await observerSource(h, `${upstream.url}/mcp-json`);
    const { driver, instance, seen, write, letGo } = await heldStore();
    try {
      h.clock.advance(observer_cache_ttl_ms + 1_000);
      const first = await Promise.race([instance.observerByToken(seen.observer_token), write]);
      expect(first).toMatchObject({ source_id: seen.id });
      const refused = await Promise.race([instance.observerByToken(unseen.observer_token).then(() => "answered", (error: Error) => error.message), write]);
      expect(refused).toBe(`the observer token lookup did not finish within ${observer_lookup_wait_ms} ms (the database is busy)`);
    } finally {
      letGo();
    }
    expect(await write).toBe("the write went through");
    expect(instance.observerLookupsPending).toBe(0);
    // The lookup that went on has answered meanwhile, or answers now.
    expect((await instance.observerByToken(unseen.observer_token))?.source_id).toBe(unseen.id);
    await driver.close();
  });
});

describe("observer token lookups left running while the database is held", () => {
  it("are at most as many as the cache holds tokens: past that an unseen token is refused without queueing another read, and a seen one goes on its last answer", async () => {
    const { driver, instance, seen, write, letGo } = await heldStore();
    try {
      h.clock.advance(observer_cache_ttl_ms + 1_000);
      const random = Array.from({ length: observer_cache_entries_max + 10 }, (_, index) => instance.observerByToken(`bsr_obs_random_${index}`).catch(() => "busy"));
      expect(instance.observerLookupsPending).toBe(observer_cache_entries_max);
      expect(new Set(await Promise.all(random))).toEqual(new Set(["busy"]));
      // The seen token's own lookup is not started past the cap, and it goes on its last answer.
      expect((await instance.observerByToken(seen.observer_token))?.source_id).toBe(seen.id);
      expect(instance.observerLookupsPending).toBe(observer_cache_entries_max);
    } finally {
      letGo();
    }
    await write;
    await driver.close();
  });
});
