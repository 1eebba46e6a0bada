// A process that stops before its observed calls are written (killed, or closed while the store
// failed) loses them, since writing is off the critical path; but never silently: its run row
// stays unended and falls silent, and another instance writes a system.observer_lost entry
// with how many calls had no entry.

import { join } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSigningKey } from "../../src/evidence/keys.js";
import { createBursar } from "../../src/index.js";
import type { AppendInput } from "../../src/evidence/index.js";
import { logSink, observer_lost_kind, observer_resumed_kind, ObserverRuns, type CallCounts } from "../../src/observer/index.js";
import { run_heartbeat_ms, run_silent_ms_max_default } from "../../src/observer/runs.js";
import { harness, operator_token, type Harness, type HarnessOptions } from "../ingest/support.js";
import { startBursar } from "../support/process.js";
import { waitUntil } from "../support/wait.js";
import { observerSource, sdkClient, StoppableStore, type ObserverSourceCreated } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

interface RunRow {
  run_id: string;
  calls_taken: number;
  calls_written: number;
  ended_at_ms: number | null;
}

let upstream: Upstream;
beforeAll(async () => {
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream.close();
});

async function runRows(h: Pick<Harness, "bursar">): Promise<RunRow[]> {
  return h.bursar.driver.read((tx) => tx.all<RunRow>("SELECT run_id, calls_taken, calls_written, ended_at_ms FROM observer_runs ORDER BY started_at_ms"));
}

/** Another instance on the same database, its clock `ahead_ms` past the harness's. */
function otherInstance(h: Harness, ahead_ms = run_silent_ms_max_default + 1_000): ObserverRuns {
  return new ObserverRuns({ driver: h.bursar.driver, log: h.bursar.log, clock: () => new Date(h.clock().getTime() + ahead_ms) });
}

/** Runs `test` on a harness of its own, closed (its directory removed) whether or not it passes. */
async function withHarness(options: HarnessOptions, test: (h: Harness) => Promise<void>): Promise<void> {
  const h = await harness(options);
  try {
    await test(h);
  } finally {
    await h.close();
  }
}

async function echo(source: ObserverSourceCreated, texts: readonly string[]): Promise<void> {
  const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token });
  for (const text of texts) await client.callTool({ name: "echo", arguments: { text } });
  await client.close();
}

describe("an observer run that stops with calls unwritten", () => {
  let h: Harness;
  let store_down = false;
  let source: ObserverSourceCreated;

  beforeAll(async () => {
    // The log's own sink, which the test can make fail as a store that went away does.
    const sink = {
      append: (inputs: readonly AppendInput[], counts: CallCounts) =>
        store_down ? Promise.reject(new Error("store down")) : logSink(h.bursar.driver, h.bursar.log, h.evidence.runs).append(inputs, counts),
    };
    h = await harness({ sink, sweep_ms: 50, retry_delay_ms: 50 });
    source = await observerSource(h, `${upstream.url}/mcp`);
  });
  afterAll(async () => {
    store_down = false;
    await h.close();
  });

  it("is found lost by another instance once silent, with the calls that have no entry, once", async () => {
    await echo(source, ["a", "b", "c"]);
    expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
    const [written] = await runRows(h);
    expect(written).toMatchObject({ run_id: h.evidence.runs.run_id, calls_taken: 3, calls_written: 3, ended_at_ms: null });

    store_down = true;
    await echo(source, ["d", "e", "f", "g"]);
    // The sweep's heartbeat takes the count in while the store for entries is down.
    await waitUntil("the heartbeat's count", async () => (await runRows(h))[0]!.calls_taken === 7);

    // Silent for less than the limit: still taken for alive.
    expect(await otherInstance(h, 1_000).findLost()).toEqual([]);
    const before = (await h.entries()).length;
    expect(await otherInstance(h).findLost()).toEqual([h.evidence.runs.run_id]);
    const lost = await h.entries(observer_lost_kind);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.seq).toBe(before);
    expect(lost[0]!.entry.body).toMatchObject({ run_id: h.evidence.runs.run_id, calls_taken: 7, calls_written: 3, calls_unwritten: 4 });
    const body = lost[0]!.entry.body as { last_seen_at: string; found_at: string; started_at: string };
    expect(Date.parse(body.found_at) - Date.parse(body.last_seen_at)).toBeGreaterThan(run_silent_ms_max_default);
    expect(Date.parse(body.started_at)).toBeLessThanOrEqual(Date.parse(body.last_seen_at));
    expect((await runRows(h))[0]!.ended_at_ms).not.toBeNull();
    // Claimed once: a second look, by this instance or a third, writes nothing more.
    expect(await otherInstance(h).findLost()).toEqual([]);
    expect(await h.entries(observer_lost_kind)).toHaveLength(1);
  });

  it("is live again when it was only stalled, says so in the log, and its calls are written once the store is back", async () => {
    const [lost] = await h.entries(observer_lost_kind);
    store_down = false;
    expect(await h.evidence.observer.recorder.drain(5_000)).toBe(true);
    const [row] = await runRows(h);
    expect(row).toMatchObject({ calls_taken: 7, calls_written: 7, ended_at_ms: null });
    const resumed = await h.entries(observer_resumed_kind);
    expect(resumed).toHaveLength(1);
    expect(resumed[0]!.seq).toBeGreaterThan(lost!.seq);
    expect(resumed[0]!.entry.body).toMatchObject({ run_id: h.evidence.runs.run_id, calls_taken: 7, calls_written: 3 });
    const texts = (await h.entries("observer.call")).map((stored) => (stored.entry.body.args as { text: string }).text);
    expect(texts).toEqual(["a", "b", "c", "d", "e", "f", "g"]);
  });
});

describe("an observer closed while its store fails", () => {
  it("leaves its run open with every call it took in, to be found lost", async () => {
    // The evidence store as its own connection to the database file, closed: every write fails as a store gone away does.
    let store: StoppableStore | undefined;
    await withHarness({ sink: { append: (inputs) => store!.append(inputs) }, retry_delay_ms: 50 }, async (h) => {
      store = new StoppableStore(h.db, () => h);
      store.start();
      await store.stop();
      const source = await observerSource(h, `${upstream.url}/mcp`);
      await echo(source, ["p", "q"]);
      await h.evidence.observer.close();
      expect(await h.entries("observer.call")).toEqual([]);
      expect(await runRows(h)).toMatchObject([{ run_id: h.evidence.runs.run_id, calls_taken: 2, calls_written: 0, ended_at_ms: null }]);
      expect(await otherInstance(h).findLost()).toEqual([h.evidence.runs.run_id]);
      expect((await h.entries(observer_lost_kind))[0]!.entry.body).toMatchObject({ calls_taken: 2, calls_written: 0, calls_unwritten: 2 });
    });
  });
});

describe("runs that are not lost", () => {
  it("a clean stop ends the run: nothing is found lost", async () => {
    await withHarness({}, async (h) => {
      const source = await observerSource(h, `${upstream.url}/mcp`);
      await echo(source, ["x"]);
      await h.evidence.observer.close();
      expect(await runRows(h)).toMatchObject([{ calls_taken: 1, calls_written: 1, ended_at_ms: expect.any(Number) }]);
      expect(await otherInstance(h).findLost()).toEqual([]);
      expect(await h.entries(observer_lost_kind)).toEqual([]);
    });
  });

  it("a run that took nothing in is ended silently where no observer source exists, and with an entry where one does", async () => {
    await withHarness({}, async (h) => {
      await h.evidence.runs.heartbeat(() => 0);
      expect(await otherInstance(h).findLost()).toEqual([h.evidence.runs.run_id]);
      expect(await runRows(h)).toEqual([]);
      // Back after all (its next heartbeat is due): its row is made again, and nothing says it was lost or resumed.
      h.clock.advance(run_heartbeat_ms);
      await h.evidence.runs.heartbeat(() => 0);
      expect(await runRows(h)).toMatchObject([{ run_id: h.evidence.runs.run_id, calls_taken: 0, ended_at_ms: null }]);
      expect(await h.entries(observer_lost_kind)).toEqual([]);
      expect(await h.entries(observer_resumed_kind)).toEqual([]);
      await observerSource(h, `${upstream.url}/mcp`);
      const later = otherInstance(h, 3 * run_silent_ms_max_default);
      expect(await h.evidence.runs.end(0)).toBe(true);
      const third = new ObserverRuns({ driver: h.bursar.driver, log: h.bursar.log, clock: h.clock });
      await third.heartbeat(() => 0);
      expect(await later.findLost()).toEqual([third.run_id]);
      expect((await h.entries(observer_lost_kind)).map((stored) => stored.entry.body)).toMatchObject([{ run_id: third.run_id, calls_taken: 0, calls_unwritten: 0 }]);
    });
  });
});

describe("a bursar serve process killed with SIGKILL", () => {
  it("leaves its run to be found lost, counting as written exactly the calls that have their entry", async () => {
    const data_dir = mkdtempSync(join(tmpdir(), "bursar-lost-run-"));
    const served = await startBursar(["serve", "--port", "0"], { BURSAR_DATA_DIR: data_dir, BURSAR_ADMIN_TOKEN: operator_token });
    try {
      const created = await fetch(`${served.url}/api/v1/evidence-sources`, {
        method: "POST",
        headers: { authorization: `Bearer ${operator_token}`, "content-type": "application/json" },
        body: JSON.stringify({ kind: "observer", name: "their-mcp", upstream_url: `${upstream.url}/mcp` }),
      });
      const source = (await created.json()) as ObserverSourceCreated;
      await echo(source, ["one", "two"]);
      // Written (the recorder writes every 100 ms): the run's row counts both.
      const db = join(data_dir, "bursar.db");
      const reader = await createBursar({ db, signingKey: loadSigningKey(join(data_dir, "signing-key.pem")) });
      try {
        await waitUntil("both calls written", async () => (await runRows({ bursar: reader }))[0]?.calls_written === 2);
        await echo(source, ["three"]);
        await served.stop("SIGKILL");
        const clock = () => new Date(Date.now() + run_silent_ms_max_default + 1_000);
        const finder = new ObserverRuns({ driver: reader.driver, log: reader.log, clock });
        const [run] = await runRows({ bursar: reader });
        expect(await finder.findLost()).toEqual([run!.run_id]);
        const size = await reader.log.treeSize();
        const entries = (await reader.log.entries(0, size)).map((stored) => stored.entry);
        // "three" was answered just before the kill: usually still queued (the recorder writes
        // every 100 ms), written only when the kill came late.
        const texts = entries.filter((entry) => entry.kind === "observer.call").map((entry) => (entry.body.args as { text: string }).text);
        expect([["one", "two"], ["one", "two", "three"]]).toContainEqual(texts);
        const lost = entries.filter((entry) => entry.kind === observer_lost_kind);
        expect(lost).toHaveLength(1);
        expect(lost[0]!.body).toMatchObject({ run_id: run!.run_id, calls_written: texts.length });
        expect(lost[0]!.body.calls_taken).toBeGreaterThanOrEqual(texts.length);
      } finally {
        await reader.close();
      }
    } finally {
      await served.stop("SIGKILL").catch(() => undefined);
      rmSync(data_dir, { recursive: true, force: true });
    }
  });
});
