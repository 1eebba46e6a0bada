// Delivery receipts verify offline: `bursar send-decisions` posts a .jsonl file in
// deliveries of ≤ 500 and writes the receipts; `bursar export` + `bursar verify` check the
// log with only the public key, and each receipt's signature and leaf hashes match the export.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leafHash, parseVerifierKey, verifyDeliveryReceipt, type DeliveryReceipt } from "../../src/evidence/index.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";
import { ndjson, record } from "./support.js";

let server: TestServer;
beforeAll(async () => {
  ensureBuilt();
  server = await testServer();
});
afterAll(async () => server.close());

describe("send-decisions and offline verification", () => {
  it("sends 1,100 records in three signed deliveries whose receipts verify against the exported log", async () => {
    const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "cli" });
    const file = join(server.dir, "decisions.jsonl");
    const receipts_file = join(server.dir, "receipts.jsonl");
    writeFileSync(file, ndjson(Array.from({ length: 1100 }, (_, i) => record(`evt_cli_${i}`)), "\r\n"));
    const env = { BURSAR_SOURCE_SIGNING_KEY: created.body.signing_key };
    const sent = await runBursar(["send-decisions", file, "--url", server.url, "--source", created.body.id, "--receipts", receipts_file], env);
    expect(sent.stderr).toBe("");
    expect(sent.code).toBe(0);
    expect(sent.stdout).toContain("sent 1100 records in 3 deliveries: 1100 new, 0 already received");
    const again = await runBursar(["send-decisions", file, "--url", server.url, "--source", created.body.id], env);
    expect(again.stdout).toContain("0 new, 1100 already received");

    const export_file = join(server.dir, "log.jsonl");
    const checkpoint = join(server.dir, "cp.txt");
    const data_env = { BURSAR_DATA_DIR: server.dir };
    expect((await runBursar(["export", "--out", export_file, "--checkpoint", checkpoint], data_env)).code).toBe(0);
    const key = (await runBursar(["key"], data_env)).stdout.trim();
    const verified = await runBursar(["verify", export_file, "--checkpoint", checkpoint, "--key", key]);
    expect(verified.stdout).toContain("OK");
    expect(verified.code).toBe(0);

    const leaves = new Map<number, string>();
    for (const line of readFileSync(export_file, "utf8").split("\n")) {
      if (!line.startsWith('{"body":')) continue;
      leaves.set((JSON.parse(line) as { seq: number }).seq, leafHash(line).toString("hex"));
    }
    const verifier = parseVerifierKey(key);
    const receipts = readFileSync(receipts_file, "utf8").trim().split("\n").map((line) => JSON.parse(line) as DeliveryReceipt);
    expect(receipts.map((receipt) => receipt.records.length)).toEqual([500, 500, 100]);
    for (const receipt of receipts) {
      expect(verifyDeliveryReceipt(receipt, verifier)).toEqual({ ok: true });
      for (const listed of receipt.records) expect(leaves.get(listed.seq)).toBe(listed.leaf_hash);
    }
    const tampered = { ...receipts[0]!, records: receipts[0]!.records.map((listed, i) => (i === 0 ? { ...listed, seq: listed.seq + 1 } : listed)) };
    expect(verifyDeliveryReceipt(tampered, verifier).ok).toBe(false);
  });

  it("prints file line numbers for a refused delivery and exits 1", async () => {
    const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "cli-bad" });
    const file = join(server.dir, "bad.jsonl");
    writeFileSync(file, `${JSON.stringify(record("evt_good"))}\n\n${JSON.stringify(record("evt_bad", { agent: { idd: "x", type: "agent" } }))}\n`);
    const sent = await runBursar(["send-decisions", file, "--url", server.url, "--source", created.body.id], { BURSAR_SOURCE_SIGNING_KEY: created.body.signing_key });
    expect(sent.code).toBe(1);
    expect(sent.stderr).toContain("line 3: agent.idd: unknown field");
  });
});
