// bench:ledger — durable authorizations/s through the ledger beside raw better-sqlite3
// one-row BEGIN IMMEDIATE … COMMIT transactions/s (synchronous=FULL, WAL) on the same disk. The
// ledger's driver is as durable (it reports a commit only after fdatasync of the WAL) but flushes
// off the event loop, one flush for every commit made meanwhile.

import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBursar } from "../src/index.js";
import { unbounded_block } from "./support.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 3);

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
    console.log(`bench:ledger (${seconds} s each, file-backed SQLite, WAL; raw: synchronous=FULL; ledger: WAL flushed off the event loop; each decision writes its evidence entry)`);
    console.log(`  raw one-row BEGIN IMMEDIATE…COMMIT           : ${raw.rate.toFixed(0).padStart(8)} tx/s   (${raw.count})`);
    console.log(`  ledger authorize, 1 at a time (durable)      : ${one.rate.toFixed(0).padStart(8)} decisions/s (${one.count})  ratio ${(one.rate / raw.rate).toFixed(3)}`);
    console.log(`  ledger authorize, 16 at once (group commit)  : ${sixteen.rate.toFixed(0).padStart(8)} decisions/s (${sixteen.count})  ratio ${(sixteen.rate / raw.rate).toFixed(3)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
