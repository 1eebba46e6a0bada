// bench:ingest — decision records/s ingested durably (SQLite WAL) with the signed delivery
// receipt, in deliveries of 500: over HTTP (signed webhook) and in-process. Each path first
// sends a few warm-up deliveries, not timed, so both measure steady state rather than the JIT.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OperatorTokens } from "../src/datadir.js";
import { SqliteDriver } from "../src/ledger/sqlite.js";
import { createBursar } from "../src/index.js";
import { ingestDelivery } from "../src/ingest/ingest.js";
import { signatureHeader } from "../src/ingest/signature.js";
import { buildServer } from "../src/server/app.js";
import { evidenceSources } from "../src/server/routes/evidence-sources.js";

const deliveries = Number(process.env.BENCH_DELIVERIES ?? 40);
const warmup_deliveries = Number(process.env.BENCH_WARMUP_DELIVERIES ?? 3);
const records_per_delivery = 500;
const goal_records_per_second = 20_000;
const operator_token = "bench-operator-token-0123456789";

function delivery(prefix: string): Buffer {
  const lines: string[] = [];
  for (let i = 0; i < records_per_delivery; i++) {
    lines.push(
      JSON.stringify({
        schema: "bursar.gateway-decision/1",
        event_id: `${prefix}_${i}`,
        occurred_at: "2026-10-09T14:03:11Z",
        decision: i % 7 === 0 ? "deny" : "allow",
        tool: "github/create_release",
        server: "github-mcp",
        args: { repo: "acme/api", tag: `v2.4.${i}`, notes: "release notes for the tag" },
        agent: { id: "agent-release-bot", type: "agent" },
        policy: { id: "pol_12", name: "releases need a human" },
        correlation_id: `corr-${prefix}-${i}`,
      }),
    );
  }
  return Buffer.from(`${lines.join("\n")}\n`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-bench-ingest-"));
  try {
    const bursar = await createBursar({ db: join(dir, "bursar.db") });
    const access = { operator: OperatorTokens.fromToken(operator_token), ledger: bursar.ledger };
    const evidence = evidenceSources({ access, bursar, master_key: "bench-master-key-0123456789" });
    const app = await buildServer({ logger: false, plugins: evidence.plugins, onClose: () => bursar.close() });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    const { source, secrets } = await evidence.sources.create({ kind: "decisions", name: "bench" });
    const key = (secrets as { signing_key: string }).signing_key;
    const send = async (body: Buffer) => {
      const response = await fetch(`${url}/ingest/${source.id}`, {
        method: "POST",
        headers: { "content-type": "application/x-ndjson", "bursar-signature": signatureHeader([key], body, new Date()) },
        body: new Uint8Array(body),
      });
      const answer = (await response.json()) as { written: number; receipt: { records: unknown[] } };
      if (response.status !== 200 || answer.written !== records_per_delivery || answer.receipt.records.length !== records_per_delivery) throw new Error(`delivery failed: ${response.status}`);
    };
    const local = (body: Buffer) => ingestDelivery({ driver: bursar.driver, log: bursar.log, clock: () => new Date() }, source.id, body);

    for (let d = 0; d < warmup_deliveries; d++) await send(delivery(`http_warmup_${d}`));
    const bodies = Array.from({ length: deliveries }, (_, d) => delivery(`http_${d}`));
    let started = process.hrtime.bigint();
    for (const body of bodies) await send(body);
    const http_seconds = Number(process.hrtime.bigint() - started) / 1e9;

    for (let d = 0; d < warmup_deliveries; d++) await local(delivery(`lib_warmup_${d}`));
    const local_bodies = Array.from({ length: deliveries }, (_, d) => delivery(`lib_${d}`));
    started = process.hrtime.bigint();
    for (const body of local_bodies) await local(body);
    const lib_seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const synchronous = bursar.driver instanceof SqliteDriver ? ["OFF", "NORMAL", "FULL", "EXTRA"][Number(bursar.driver.db.pragma("synchronous", { simple: true }))] : "n/a";
    await app.close();

    const total = deliveries * records_per_delivery;
    const http_rate = total / http_seconds;
    const lib_rate = total / lib_seconds;
    console.log(
      `bench:ingest  ${deliveries} deliveries x ${records_per_delivery} records per path (after ${warmup_deliveries} warm-up deliveries), SQLite WAL (synchronous=${synchronous}), answered once durable, one transaction + one signed receipt per delivery`,
    );
    console.log(`  HTTP webhook (signed, NDJSON): ${Math.round(http_rate).toLocaleString("en")} records/s (${(http_seconds * 1000 / deliveries).toFixed(1)} ms per delivery)`);
    console.log(`  in-process ingestDelivery():   ${Math.round(lib_rate).toLocaleString("en")} records/s (${(lib_seconds * 1000 / deliveries).toFixed(1)} ms per delivery)`);
    console.log(`  goal ${goal_records_per_second.toLocaleString("en")} records/s over HTTP: ${http_rate >= goal_records_per_second ? "met" : "NOT met"} (ratio ${(http_rate / goal_records_per_second).toFixed(2)})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
