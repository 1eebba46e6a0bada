// bench:evidence — durable evidence appends/s (one per transaction, and batched) and offline
// verify entries/s of an export, each beside raw SHA-256 over the same bytes in the same run.

import { generateKeyPairSync, hash } from "node:crypto";
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../src/clock.js";
import { canonicalJson } from "../src/evidence/canonical.js";
import { exportLog } from "../src/evidence/export.js";
import { createLogSigner } from "../src/evidence/keys.js";
import { EvidenceLog, type AppendResult } from "../src/evidence/store.js";
import { fileLines, verifyExportFile } from "../src/evidence/verify.js";
import { migration } from "../src/ledger/migrations/002_evidence.js";
import { SqliteDriver } from "../src/ledger/sqlite.js";
import { numberKnob } from "./support.js";

const append_seconds = numberKnob("bench:evidence", "BENCH_SECONDS", 3, { min: 0, above_min: true, max: 60, whole: false });
const batch_size = 100;
const verify_entries = numberKnob("bench:evidence", "BENCH_VERIFY_ENTRIES", 200_000, { min: 1, max: 10_000_000, whole: true });
const build_batch = 1000;
const interactive = Boolean(process.stderr.isTTY) && !process.env.CI;

function progress(text: string): void {
  if (interactive) process.stderr.write(`\r${text.padEnd(60)}`);
}

function body(n: number): Record<string, unknown> {
  return {
    tool: "create_order",
    args: { amount: 50_000 + n, currency: "INR", receipt: `order ${n}`, notes: { sku: "chai-250g" } },
    verdict: { effect: "ALLOW", rule: null, reason: "within block" },
    block: { reserved: 1_000_000, spent: 0, held: 50_000, available: 950_000, currency: "INR" },
    agent_id: "agent_01",
  };
}

async function openLog(path: string): Promise<{ driver: SqliteDriver; log: EvidenceLog }> {
  const driver = new SqliteDriver({ path });
  await driver.migrate([migration]);
  const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, "bench.bursar/log");
  const log = await EvidenceLog.open(driver, { signer, origin: "bench.bursar/log", clock: systemClock });
  return { driver, log };
}

/** Appends for `append_seconds`, `per_transaction` entries per committed transaction. */
async function appendRate(dir: string, per_transaction: number): Promise<{ rate: number; texts: string[] }> {
  const { driver, log } = await openLog(join(dir, `append-${per_transaction}.db`));
  const appended: AppendResult[] = [];
  const start = performance.now();
  const deadline = start + append_seconds * 1000;
  while (performance.now() < deadline) {
    const inputs = Array.from({ length: per_transaction }, (_, i) => ({ kind: "gate.decision", source: "gate", body: body(appended.length + i) }));
    appended.push(...(await driver.transaction((tx) => log.appendMany(tx, inputs))));
    progress(`appends (${per_transaction}/transaction): ${appended.length}`);
  }
  const rate = appended.length / ((performance.now() - start) / 1000);
  await driver.close();
  return { rate, texts: appended.map((result) => canonicalJson(result.entry)) };
}

/** One-shot SHA-256 of each item, repeated for about a second: the floor any hashing log pays. */
function hashRate(items: readonly (string | Buffer)[]): number {
  let count = 0;
  const start = performance.now();
  while (performance.now() - start < 1000) {
    for (const item of items) hash("sha256", item, "buffer");
    count += items.length;
  }
  return count / ((performance.now() - start) / 1000);
}

async function buildExport(dir: string): Promise<{ path: string; checkpoint: string; key: string }> {
  const { driver, log } = await openLog(join(dir, "verify.db"));
  for (let built = 1; built < verify_entries; built += build_batch) {
    const count = Math.min(build_batch, verify_entries - built);
    const inputs = Array.from({ length: count }, (_, i) => ({ kind: "gate.decision", source: "gate", body: body(built + i) }));
    await driver.transaction((tx) => log.appendMany(tx, inputs));
    if ((built - 1) % (build_batch * 10) === 0) await log.checkpoint();
    progress(`building ${built + count} / ${verify_entries}`);
  }
  const final = await log.checkpoint();
  const path = join(dir, "log.jsonl");
  const stream = createWriteStream(path);
  await exportLog(driver, {
    size: final.size,
    exported_at: systemClock().toISOString(),
    write: async (text) => {
      if (!stream.write(text)) await once(stream, "drain");
    },
  });
  stream.end();
  await once(stream, "finish");
  writeFileSync(join(dir, "cp.txt"), final.note);
  await driver.close();
  return { path, checkpoint: final.note, key: log.verifierKey };
}

function entryLines(path: string): Buffer[] {
  const lines: Buffer[] = [];
  for (const line of fileLines(path)) if (line.toString("latin1", 0, 8) === '{"body":') lines.push(Buffer.from(line));
  return lines;
}

function row(label: string, rate: number, baseline: number): string {
  return `${label.padEnd(44)} ${Math.round(rate).toLocaleString("en-US").padStart(12)}/s   ${(rate / baseline).toFixed(4)} of raw SHA-256`;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-evidence-"));
  try {
    const single = await appendRate(dir, 1);
    const batched = await appendRate(dir, batch_size);
    const singleHash = hashRate(single.texts);
    const batchedHash = hashRate(batched.texts.slice(0, 20_000));
    const exported = await buildExport(dir);
    const lines = entryLines(exported.path);
    const start = performance.now();
    const report = verifyExportFile(exported.path, { checkpoint: exported.checkpoint, key: exported.key });
    const verifyRate = report.entries / ((performance.now() - start) / 1000);
    if (!report.ok) throw new Error(`verify failed: ${report.failure?.message}`);
    const verifyHash = hashRate(lines);
    progress("");
    if (interactive) process.stderr.write("\r");
    console.log("bench:evidence (file-backed SQLite, WAL flushed with fdatasync before each answer; Ed25519 receipt per entry)");
    console.log(row("durable appends, 1 per transaction", single.rate, singleHash));
    console.log(row("  raw SHA-256 of the same entry bytes", singleHash, singleHash));
    console.log(row(`durable appends, ${batch_size} per transaction`, batched.rate, batchedHash));
    console.log(row("  raw SHA-256 of the same entry bytes", batchedHash, batchedHash));
    console.log(row(`offline verify of ${report.entries} exported entries`, verifyRate, verifyHash));
    console.log(row("  raw SHA-256 of the same entry lines", verifyHash, verifyHash));
    console.log(`verify goal >= 100,000 entries/s: ${verifyRate >= 100_000 ? "met" : "NOT met"}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
