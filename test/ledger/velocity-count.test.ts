// The velocity guard's count (migration 10): an agent's money calls are numbered in time order,
// so the calls in a window are counted from two index seeks. The count must equal counting the
// rows one by one, whatever the clock does (steps back included), on both backends, and a
// database migrated from version 9 must count its old rows as before.

import type Database from "better-sqlite3";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { createBursar, openDriver } from "../../src/index.js";
import { sequentialIds } from "../../src/ids.js";
import { authorizeBatch } from "../../src/ledger/authorize-batch.js";
import { migrations } from "../../src/ledger/migrations/index.js";
import type { SqliteDriver } from "../../src/ledger/sqlite.js";
import { count_calls_sql, countCalls, recordMoneyCall } from "../../src/ledger/statements.js";
import { backends, closeAfterTest } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

interface Row {
  agent_id: string;
  at_ms: number;
  n: number;
}

/** The count as the guard asked for it before migration 10: every row in the window, up to max_calls. */
function countedOneByOne(rows: readonly Row[], agent_id: string, since_ms: number, max_calls: number): number {
  return Math.min(rows.filter((row) => row.agent_id === agent_id && row.at_ms > since_ms).length, max_calls);
}

const step = fc.record({
  agent: fc.constantFrom("agt_a", "agt_b"),
  // Mostly forward, sometimes back (the host's clock stepping back), sometimes not at all.
  advance_ms: fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: -30_000, max: 0 }), fc.constant(0)),
  window_seconds: fc.constantFrom(1, 10, 60),
  max_calls: fc.constantFrom(1, 3, 1_000),
});

for (const backend of backends()) {
  describe(`velocity count by call numbers (${backend.name})`, () => {
    it("equals counting the window's rows one by one, with every call numbered and stamped in order", async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
          const driver = openDriver(await backend.db());
          closeAfterTest(driver);
          await driver.migrate(migrations);
          let now_ms = 1_790_000_000_000;
          for (const { agent, advance_ms, window_seconds, max_calls } of steps) {
            now_ms += advance_ms;
            const since_ms = now_ms - window_seconds * 1000;
            const checked = await driver.transaction(async (tx) => {
              const rows = (await tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls ORDER BY agent_id, n")).map((row) => ({
                agent_id: row.agent_id,
                at_ms: Number(row.at_ms),
                n: Number(row.n),
              }));
              const counted = await countCalls(tx, agent, now_ms, { window_seconds, max_calls });
              await recordMoneyCall(tx, agent, now_ms);
              return { rows, counted };
            });
            expect(checked.counted).toBe(countedOneByOne(checked.rows, agent, since_ms, max_calls));
            for (const id of ["agt_a", "agt_b"]) {
              const own = checked.rows.filter((row) => row.agent_id === id);
              expect(own.map((row) => row.n)).toEqual(own.map((_, index) => index + 1));
              for (let index = 1; index < own.length; index++) expect(own[index]!.at_ms).toBeGreaterThanOrEqual(own[index - 1]!.at_ms);
            }
          }
          await driver.close();
        }),
        { numRuns: backend.name === "postgres" ? 15 : 60 },
      );
    });

    it("stamps a call made after the clock stepped back with the newest call's time", async () => {
      const driver = openDriver(await backend.db());
      closeAfterTest(driver);
      await driver.migrate(migrations);
      await driver.transaction((tx) => recordMoneyCall(tx, "agt_a", 50_000));
      await driver.transaction((tx) => recordMoneyCall(tx, "agt_a", 40_000));
      const rows = await driver.read((tx) => tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls ORDER BY n"));
      expect(rows.map((row) => [Number(row.n), Number(row.at_ms)])).toEqual([
        [1, 50_000],
        [2, 50_000],
      ]);
      // Both stay in a 60 s window until 60 s after the newest call's time, as the first did.
      expect(await driver.read((tx) => countCalls(tx, "agt_a", 109_999, { window_seconds: 60, max_calls: 10 }))).toBe(2);
      expect(await driver.read((tx) => countCalls(tx, "agt_a", 110_000, { window_seconds: 60, max_calls: 10 }))).toBe(0);
      await driver.close();
    });

    it("numbers the calls a version 9 database holds by time, per agent, and counts them as before", async () => {
      const driver = openDriver(await backend.db());
      closeAfterTest(driver);
      await driver.migrate(migrations.filter((migration) => migration.version <= 9));
      // Inserted out of time order, as a clock stepping back left them before migration 10.
      const old = [
        ["agt_a", 3_000],
        ["agt_b", 1_000],
        ["agt_a", 1_000],
        ["agt_a", 2_000],
        ["agt_b", 5_000],
        ["agt_a", 2_000],
      ] as const;
      await driver.transaction(async (tx) => {
        for (const [agent_id, at_ms] of old) await tx.run("INSERT INTO money_calls (agent_id, at_ms) VALUES (?, ?)", [agent_id, at_ms]);
      });
      expect(await driver.migrate(migrations)).toEqual(migrations.filter((migration) => migration.version > 9).map((migration) => migration.version));
      const rows = await driver.read((tx) => tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls ORDER BY agent_id, n"));
      expect(rows.map((row) => [row.agent_id, Number(row.at_ms), Number(row.n)])).toEqual([
        ["agt_a", 1_000, 1],
        ["agt_a", 2_000, 2],
        ["agt_a", 2_000, 3],
        ["agt_a", 3_000, 4],
        ["agt_b", 1_000, 1],
        ["agt_b", 5_000, 2],
      ]);
      const rows_before = old.map(([agent_id, at_ms]) => ({ agent_id, at_ms, n: 0 }));
      for (const since_ms of [0, 999, 1_000, 1_999, 2_000, 2_999, 3_000, 4_999, 5_000]) {
        for (const agent_id of ["agt_a", "agt_b", "agt_none"]) {
          const counted = await driver.read((tx) => countCalls(tx, agent_id, since_ms + 10_000, { window_seconds: 10, max_calls: 1_000 }));
          expect(counted).toBe(countedOneByOne(rows_before, agent_id, since_ms, 1_000));
        }
      }
      await driver.close();
    });

    for (const batched of backend.name === "postgres" ? [true, false] : [false]) {
      const path = backend.name === "postgres" ? (batched ? ", decided in batches" : ", decided one by one") : "";
      it(`numbers an agent's refusals before it had a block, and counts them once it has one${path}`, async () => {
        const clock = manualClock();
        const bursar = await createBursar({ db: await backend.db(), clock, ids: sequentialIds(), pg_batch_decisions: batched });
        closeAfterTest(bursar);
        const { agent_id } = await bursar.operator.createAgent({ name: "late" });
        const order = (index: number) => bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: `late-${index}` } });
        const rules: string[] = [];
        for (let index = 0; index < 5; index++, clock.advance(1_000)) rules.push((await order(index)).verdict.rule);
        await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 100_000, velocity: { max_calls: 5, window_seconds: 60 } });
        for (let index = 5; index < 8; index++, clock.advance(1_000)) rules.push((await order(index)).verdict.rule);
        expect(rules).toEqual(["R4", "R4", "R4", "R4", "R4", "R6", "R6", "R6"]);
        const rows = await bursar.driver.read((tx) => tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls WHERE agent_id = ? ORDER BY n", [agent_id]));
        expect(rows.map((row) => Number(row.n))).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      });
    }

    if (backend.name === "postgres") {
      it("numbers a blockless agent's calls in a batch after its newest call (the batch itself, without the one-by-one fallback)", async () => {
        const bursar = await createBursar({ db: await backend.db(), ids: sequentialIds() });
        closeAfterTest(bursar);
        const { agent_id } = await bursar.operator.createAgent({ name: "blockless" });
        await bursar.driver.transaction((tx) => recordMoneyCall(tx, agent_id, Date.now()));
        const inputs = [0, 1].map((index) => ({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: `batch-${index}` } }));
        const results = await bursar.driver.transaction((tx) => authorizeBatch(tx, bursar.ledger.context, inputs, { wait_for: new Set() }));
        expect(results.map((result) => result?.verdict.rule)).toEqual(["R4", "R4"]);
        const rows = await bursar.driver.read((tx) => tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls WHERE agent_id = ? ORDER BY n", [agent_id]));
        expect(rows.map((row) => Number(row.n))).toEqual([1, 2, 3]);
      });

      it("numbers every call once when one agent's transactions lock no common block (a blockless agent's, 8 instances at once)", async () => {
        // One call at a time per transaction (not batched), as captures are: without the agent's
        // numbering lock, collisions here ran out of retries and failed calls with a raw 23505.
        const db = await backend.db();
        const signingKey = generateSigningKeyPem();
        const instances = [];
        for (let index = 0; index < 8; index++) {
          const instance = await createBursar({ db, signingKey, pg_batch_decisions: false });
          closeAfterTest(instance);
          instances.push(instance);
        }
        const { agent_id } = await (instances[0] as (typeof instances)[number]).operator.createAgent({ name: "blockless" });
        const calls_per_instance = 16;
        const decided = await Promise.all(
          instances.flatMap((instance, which) =>
            Array.from({ length: calls_per_instance }, (_, index) =>
              instance.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: `at-once-${which}-${index}` } }),
            ),
          ),
        );
        expect(new Set(decided.map((result) => result.verdict.rule))).toEqual(new Set(["R4"]));
        const rows = await (instances[0] as (typeof instances)[number]).driver.read((tx) =>
          tx.all<Row>("SELECT agent_id, at_ms, n FROM money_calls WHERE agent_id = ? ORDER BY n", [agent_id]),
        );
        expect(rows.map((row) => Number(row.n))).toEqual(Array.from({ length: 8 * calls_per_instance }, (_, index) => index + 1));
      }, 60_000);
    }

    if (backend.name === "sqlite") {
      it("counts a window of thousands of calls from two seeks of the covering index, with no sort", async () => {
        const driver = openDriver(await backend.db()) as SqliteDriver;
        closeAfterTest(driver);
        await driver.migrate(migrations);
        await driver.transaction(async (tx) => {
          for (let call = 0; call < 5_000; call++) await recordMoneyCall(tx, "agt_a", 1_000_000 + call);
        });
        const db: Database.Database = driver.db;
        const counted = await driver.read((tx) => countCalls(tx, "agt_a", 1_005_000, { window_seconds: 4, max_calls: 100_000 }));
        expect(counted).toBe(3_999);
        // The statement countCalls runs, not a copy of it that could drift.
        const plan = db.prepare(`EXPLAIN QUERY PLAN ${count_calls_sql}`).all("agt_a", "agt_a", 0) as Array<{ detail: string }>;
        const details = plan.map((row) => row.detail).filter((detail) => detail.includes("money_calls"));
        expect(details).toHaveLength(2);
        for (const detail of details) expect(detail).toContain("USING COVERING INDEX money_calls_window");
        expect(plan.map((row) => row.detail).join("\n")).not.toMatch(/TEMP B-TREE/);
        await driver.close();
      });
    }
  });
}
