// bench:ledger — durable authorizations/s through the ledger beside raw better-sqlite3
// one-row BEGIN IMMEDIATE … COMMIT transactions/s (synchronous=FULL, WAL) on the same disk. The
// ledger's driver is as durable (it reports a commit only after fdatasync of the WAL) but flushes
// off the event loop, one flush for every commit made meanwhile. Also what an agent looping past
// its velocity limit costs: R6 refusals/s as refusals pile up, and database bytes per refusal
// with ordinary arguments beside 60 KB ones; and what a busy agent with a wide velocity limit
// costs: allowed decisions/s as its window fills with tens of thousands of calls.

import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBursar, type Bursar } from "../src/index.js";
import type { SqliteDriver } from "../src/ledger/sqlite.js";
import { numberKnob, unbounded_block } from "./support.js";

const seconds = numberKnob("bench:ledger", "BENCH_SECONDS", 3, { min: 0, above_min: true, max: 60, whole: false });

/** Authorizations from `concurrency` loops at once: with group commit, loops that queue behind
 *  one another share one COMMIT (one fsync). */
async function ledgerRate(dir: string, concurrency: number): Promise<{ rate: number; count: number }> {
  const bursar = await createBursar({ db: join(dir, `ledger-${concurrency}.db`) });
  const agent = await bursar.operator.createAgent({ name: "bench" });
  await bursar.operator.createBlock({
    ...unbounded_block,
    agent_id: agent.agent_id,
  });
  let count = 0;
  let next = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const loop = async () => {
    while (performance.now() < deadline) {
      const result = await bursar.ledger.authorize({
        agent_id: agent.agent_id,
        tool: "create_order",
        args: { amount: 1000, currency: "INR", idempotency_key: `b-${next++}` },
      });
      if (result.verdict.effect !== "ALLOW") throw new Error(`unexpected ${result.verdict.rule}`);
      count++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const rate = count / ((performance.now() - start) / 1000);
  await bursar.close();
  return { rate, count };
}

const flood_calls = numberKnob("bench:ledger", "BENCH_VELOCITY_FLOOD", 20_000, { min: 0, max: 1_000_000, whole: true });
const velocity_sample_calls = 2_000;

/** Every velocity call has a key of its own, so none replays another. */
let velocity_keys = 0;

/** Decisions/s of `count` calls by `agent_id`, 16 at once, each expected to get `rule`. */
async function decisionRate(bursar: Bursar, agent_id: string, count: number, rule: string, extra: Record<string, unknown> = {}): Promise<number> {
  let left = count;
  const start = performance.now();
  const loop = async () => {
    while (left-- > 0) {
      const args = { amount: 1000, currency: "INR", idempotency_key: `v-${velocity_keys++}`, ...extra };
      const result = await bursar.ledger.authorize({ agent_id, tool: "create_order", args });
      if (result.verdict.rule !== rule) throw new Error(`expected ${rule}, got ${result.verdict.rule}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, loop));
  return count / ((performance.now() - start) / 1000);
}

/** A receipt far past R0's 256 characters, which R6 refuses before R0 looks at it. */
const oversized_receipt = "r".repeat(60_000);

/** Database bytes (pages in use, as the connection sees them, WAL included) per R6 refusal. */
async function bytesPerRefusal(bursar: Bursar, agent_id: string, extra: Record<string, unknown>): Promise<number> {
  const db = (bursar.driver as SqliteDriver).db;
  const used = () => (Number(db.pragma("page_count", { simple: true })) - Number(db.pragma("freelist_count", { simple: true }))) * Number(db.pragma("page_size", { simple: true }));
  const before = used();
  await decisionRate(bursar, agent_id, velocity_sample_calls, "R6", extra);
  return (used() - before) / velocity_sample_calls;
}

/**
 * An agent past its velocity limit keeps calling (an injected agent in a loop does): R6
 * refusals/s over its first velocity_sample_calls refusals past max_calls, and over as many
 * again once flood_calls more refusals sit in its window (refusals are velocity rows too; a
 * count that scanned all of them would slow every decision behind the one write lock). Also
 * the database bytes per refusal, with ordinary arguments and with an oversized receipt.
 */
async function velocityRates(dir: string): Promise<{ first: number; flooded: number; ordinary_bytes: number; oversized_bytes: number; wide_first: number; wide_filled: number }> {
  const bursar = await createBursar({ db: join(dir, "velocity.db") });
  const velocity = { max_calls: 10, window_seconds: 3_600 };
  const agentPastLimit = async (name: string) => {
    const agent = await bursar.operator.createAgent({ name });
    await bursar.operator.createBlock({ ...unbounded_block, velocity, agent_id: agent.agent_id });
    await decisionRate(bursar, agent.agent_id, velocity.max_calls, "ALLOW");
    return agent.agent_id;
  };
  // A warm-up agent first, so the measured agent's first sample is not the code's first run.
  await decisionRate(bursar, await agentPastLimit("warm-up"), velocity_sample_calls, "R6");
  const agent_id = await agentPastLimit("flooding");
  const first = await decisionRate(bursar, agent_id, velocity_sample_calls, "R6");
  await decisionRate(bursar, agent_id, flood_calls, "R6");
  const flooded = await decisionRate(bursar, agent_id, velocity_sample_calls, "R6");
  const ordinary_bytes = await bytesPerRefusal(bursar, agent_id, {});
  const oversized_bytes = await bytesPerRefusal(bursar, agent_id, { receipt: oversized_receipt });
  // A busy agent allowed a million calls an hour: every allowed call stays in its window, which
  // the guard counts on each decision (from two index seeks since migration 10, however many).
  const busy = await bursar.operator.createAgent({ name: "busy" });
  await bursar.operator.createBlock({ ...unbounded_block, velocity: { max_calls: 1_000_000, window_seconds: 3_600 }, agent_id: busy.agent_id });
  const wide_first = await decisionRate(bursar, busy.agent_id, velocity_sample_calls, "ALLOW");
  await decisionRate(bursar, busy.agent_id, flood_calls, "ALLOW");
  const wide_filled = await decisionRate(bursar, busy.agent_id, velocity_sample_calls, "ALLOW");
  await bursar.close();
  return { first, flooded, ordinary_bytes, oversized_bytes, wide_first, wide_filled };
}

function rawRate(dir: string): { rate: number; count: number } {
  const db = new Database(join(dir, "raw.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
  let count = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  while (performance.now() < deadline) {
    db.exec("BEGIN IMMEDIATE");
    insert.run(count);
    db.exec("COMMIT");
    count++;
  }
  const rate = count / ((performance.now() - start) / 1000);
  db.close();
  return { rate, count };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-ledger-"));
  try {
    const raw = rawRate(dir);
    const one = await ledgerRate(dir, 1);
    const sixteen = await ledgerRate(dir, 16);
    const velocity = await velocityRates(dir);
    console.log(`bench:ledger (${seconds} s each, file-backed SQLite, WAL; raw: synchronous=FULL; ledger: WAL flushed off the event loop; each decision writes its evidence entry)`);
    console.log(`  raw one-row BEGIN IMMEDIATE…COMMIT           : ${raw.rate.toFixed(0).padStart(8)} tx/s   (${raw.count})`);
    console.log(`  ledger authorize, 1 at a time (durable)      : ${one.rate.toFixed(0).padStart(8)} decisions/s (${one.count})  ratio ${(one.rate / raw.rate).toFixed(3)}`);
    console.log(`  ledger authorize, 16 at once (group commit)  : ${sixteen.rate.toFixed(0).padStart(8)} decisions/s (${sixteen.count})  ratio ${(sixteen.rate / raw.rate).toFixed(3)}`);
    console.log(`  ${"R6 refusals, 16 at once, first past max_calls".padEnd(45)}: ${velocity.first.toFixed(0).padStart(8)} decisions/s (${velocity_sample_calls})`);
    console.log(
      `  ${`R6 refusals, ${flood_calls} more in the window`.padEnd(45)}: ${velocity.flooded.toFixed(0).padStart(8)} decisions/s (${velocity_sample_calls})  ` +
        `ratio ${(velocity.flooded / velocity.first).toFixed(3)} to the first`,
    );
    console.log(`  ${"allowed, 1M calls/h limit, window nearly empty".padEnd(45)}: ${velocity.wide_first.toFixed(0).padStart(8)} decisions/s (${velocity_sample_calls})`);
    console.log(
      `  ${`allowed, 1M calls/h limit, ${flood_calls + 2 * velocity_sample_calls} in the window`.padEnd(45)}: ${velocity.wide_filled.toFixed(0).padStart(8)} decisions/s (${velocity_sample_calls})  ` +
        `ratio ${(velocity.wide_filled / velocity.wide_first).toFixed(3)} to the first`,
    );
    console.log(`  ${"database bytes per R6 refusal, ordinary call".padEnd(45)}: ${velocity.ordinary_bytes.toFixed(0).padStart(8)} bytes (${velocity_sample_calls})`);
    console.log(
      `  ${"database bytes per R6 refusal, 60 KB receipt".padEnd(45)}: ${velocity.oversized_bytes.toFixed(0).padStart(8)} bytes (${velocity_sample_calls})  ` +
        `ratio ${(velocity.oversized_bytes / velocity.ordinary_bytes).toFixed(3)} to the ordinary`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
