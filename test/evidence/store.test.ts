// The log over real SQLite and PostgreSQL: appends in the caller's transaction, gap-free
// sequence numbers, append-only triggers, receipts, checkpoints on schedule and proofs that verify.

import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/evidence/canonical.js";
import { leafHash } from "../../src/evidence/merkle.js";
import { openCheckpoint, parseVerifierKey } from "../../src/evidence/note.js";
import { checkConsistencyDocument, checkInclusionDocument } from "../../src/evidence/proof.js";
import { verifyReceipt } from "../../src/evidence/receipt.js";
import { EvidenceIntegrityError, EvidenceLog, EvidenceRangeError } from "../../src/evidence/store.js";
import type { EvidenceLogOptions } from "../../src/evidence/store.js";
import type { SqlDriver } from "../../src/ledger/driver.js";
import { backends, closeAfterTest } from "../support/backends.js";
import { newSigner, openTestLog as openLogOn, test_origin, type TestLog } from "./support.js";

const decision = (n: number) => ({ kind: "gate.decision", source: "gate", body: { n, effect: "ALLOW" } });

/** A bare multi-row INSERT into log_entries, bypassing the log, with these sequence numbers. */
function entriesInsert(seqs: number[]): string {
  const rows = seqs.map((seq) => `(${seq}, 'k', 's', 't', '{}', '${"0".repeat(64)}', 'sig')`);
  return `INSERT INTO log_entries (seq, kind, source, received_at, entry_text, leaf_hash, receipt_signature) VALUES ${rows.join(", ")}`;
}

for (const backend of backends()) {
  describe(backend.name, () => {
    /** A fresh log on a fresh database of this backend, closed after the test. */
    /** Deletes the entries from `seq` on, as a database restored to an earlier point would lose them. */
    async function loseEntriesFrom(driver: SqlDriver, seq: number): Promise<void> {
      const lose =
        backend.name === "sqlite"
          ? ["DROP TRIGGER IF EXISTS log_entries_no_delete", "DROP TRIGGER IF EXISTS log_head_forward_only", `DELETE FROM log_entries WHERE seq >= ${seq}`, `UPDATE log_head SET size = ${seq}`]
          : [
              "ALTER TABLE log_entries DISABLE TRIGGER USER",
              "ALTER TABLE log_head DISABLE TRIGGER USER",
              `DELETE FROM log_entries WHERE seq >= ${seq}`,
              `UPDATE log_head SET size = ${seq}`,
              "ALTER TABLE log_entries ENABLE TRIGGER USER",
              "ALTER TABLE log_head ENABLE TRIGGER USER",
            ];
      await driver.transaction(async (tx) => {
        for (const sql of lose) await tx.run(sql);
      });
    }

    async function openTestLog(options: Partial<EvidenceLogOptions> = {}): Promise<TestLog> {
      const opened = await openLogOn({ ...options, path: await backend.db() });
      closeAfterTest(opened.driver);
      return opened;
    }

    describe("EvidenceLog.open", () => {
      it("writes system.genesis as seq 0 and signs a first checkpoint", async () => {
        const { log, signer } = await openTestLog();
        const [genesis] = await log.entries(0, 1);
        expect(genesis!.entry.kind).toBe("system.genesis");
        expect(genesis!.entry.body).toMatchObject({ origin: test_origin, key: signer.verifierKey, key_id: signer.keyIdHex });
        const checkpoint = await log.latestCheckpoint();
        expect(checkpoint!.size).toBe(1);
        expect(openCheckpoint(checkpoint!.note, parseVerifierKey(log.verifierKey)).origin).toBe(test_origin);
      });

      it("refuses to reopen a log under another key or origin", async () => {
        const { driver, clock, signer } = await openTestLog();
        // Each refusal says what to do: restore what the log was started with, or start a new one.
        await expect(EvidenceLog.open(driver, { signer: newSigner(), origin: test_origin, clock })).rejects.toThrow(
          /not the key this log was started with .*: restore that key \(BURSAR_SIGNING_KEY, or signing-key\.pem in the data directory\), or start a new log on a new database$/,
        );
        await expect(EvidenceLog.open(driver, { signer, origin: "other/log", clock })).rejects.toThrow(
          `the log's origin is "${test_origin}", but BURSAR_LOG_ORIGIN is "other/log": a log keeps the origin it was started with (every checkpoint and verifier key names it), so set BURSAR_LOG_ORIGIN back to "${test_origin}", or start a new log on a new database for the new origin`,
        );
        const again = await EvidenceLog.open(driver, { signer, origin: test_origin, clock });
        expect(await again.treeSize()).toBe(1);
      });
    });

    describe("append", () => {
      it("assigns gap-free 0-based seqs; a rolled-back append leaves no entry and no hole", async () => {
        const { driver, log } = await openTestLog();
        const first = await driver.transaction((tx) => log.append(tx, decision(1)));
        await expect(
          driver.transaction(async (tx) => {
            await log.append(tx, decision(2));
            throw new Error("the state change failed");
          }),
        ).rejects.toThrow("the state change failed");
        const second = await driver.transaction((tx) => log.append(tx, decision(3)));
        expect([first.seq, second.seq]).toEqual([1, 2]);
        const stored = await log.entries(0, 10);
        expect(stored.map((e) => e.seq)).toEqual([0, 1, 2]);
        expect(stored.map((e) => e.entry.body.n)).toEqual([undefined, 1, 3]);
      });

      it("returns a receipt that verifies and a leaf hash over the canonical entry", async () => {
        const { driver, log } = await openTestLog();
        const result = await driver.transaction((tx) => log.append(tx, decision(7)));
        expect(result.leaf_hash).toBe(leafHash(canonicalJson(result.entry)).toString("hex"));
        expect(result.receipt).toMatchObject({ seq: result.seq, leaf_hash: result.leaf_hash, kind: "gate.decision", at: result.entry.received_at });
        // v2: the receipt names its log, the leaf hash of entry 0, and is stored marked as v2.
        const [genesis] = await log.entries(0, 1);
        expect(result.receipt.log).toBe(genesis!.leaf_hash);
        expect(log.logId).toBe(genesis!.leaf_hash);
        expect(genesis!.receipt!.log).toBe(genesis!.leaf_hash);
        const row = await driver.read((tx) => tx.get<{ receipt_signature: string }>("SELECT receipt_signature FROM log_entries WHERE seq = ?", [result.seq]));
        expect(row!.receipt_signature).toBe(`v2:${result.receipt.signature}`);
        const verifier = parseVerifierKey(log.verifierKey);
        expect(verifyReceipt(result.receipt, verifier).ok).toBe(true);
        expect(verifyReceipt({ ...result.receipt, seq: 99 }, verifier).ok).toBe(false);
        const [page] = await log.entries(result.seq, result.seq + 1);
        expect(page!.receipt).toEqual(result.receipt);
      });

      it("stores the scrubbed body and binds it by hash, never the secret; a caller's hash wins", async () => {
        const { driver, log } = await openTestLog();
        const body = { tool: "create_order", api_key: "canary-secret-1" };
        const own = await driver.transaction((tx) => log.append(tx, { kind: "gate.decision", source: "gate", body }));
        expect(own.entry.body_sha256).toBe(sha256Hex(canonicalJson({ tool: "create_order", api_key: "[redacted]" })));
        expect(own.entry.body.api_key).toBe("[redacted]");
        const raw = "a".repeat(64);
        const given = await driver.transaction((tx) =>
          log.append(tx, { kind: "ingest.decision", source: "src_1", body, body_sha256: raw, occurred_at: "2026-01-01T00:00:00Z" }),
        );
        expect(given.entry).toMatchObject({ body_sha256: raw, occurred_at: "2026-01-01T00:00:00Z" });
      });

      it("refuses unknown kinds and malformed fields before touching the table", async () => {
        const { driver, log } = await openTestLog();
        const bad = [
          { kind: "gate.whatever", source: "gate", body: {} },
          { kind: "gate.decision", source: "", body: {} },
          { kind: "gate.decision", source: "gate", body: [] as unknown as Record<string, unknown> },
          { kind: "gate.decision", source: "gate", body: {}, occurred_at: "yesterday" },
          { kind: "gate.decision", source: "gate", body: {}, body_sha256: "ABC" },
        ];
        for (const input of bad) await expect(driver.transaction((tx) => log.append(tx, input))).rejects.toThrow();
        expect(await log.treeSize()).toBe(1);
      });

      it("appendMany writes a batch larger than one INSERT statement, in order", async () => {
        const { driver, log } = await openTestLog();
        const results = await driver.transaction((tx) => log.appendMany(tx, Array.from({ length: 123 }, (_, i) => decision(i))));
        expect(results.map((r) => r.seq)).toEqual(Array.from({ length: 123 }, (_, i) => i + 1));
        expect(await log.treeSize()).toBe(124);
      });
      it("appendMany with last ends the transaction: its entries commit, and a statement after it is refused", async () => {
        const { driver, log } = await openTestLog();
        await driver.transaction(async (tx) => {
          await log.appendMany(tx, [decision(1), decision(2)], { last: true });
          await expect(tx.run("SELECT 1")).rejects.toThrow(/after its runWithCommit/);
        });
        expect(await log.treeSize()).toBe(3);
      });
    });

    describe("the tables defend themselves", () => {
      it("refuses UPDATE and DELETE of entries and checkpoints, a skipped seq and a bare head bump", async () => {
        const { driver, log } = await openTestLog();
        await driver.transaction((tx) => log.append(tx, decision(1)));
        const statements = [
          "UPDATE log_entries SET source = 'x' WHERE seq = 1",
          "DELETE FROM log_entries WHERE seq = 1",
          "UPDATE log_checkpoints SET note = 'x'",
          "DELETE FROM log_checkpoints",
          "UPDATE log_head SET size = size + 1",
          "UPDATE log_head SET size = 0",
          "DELETE FROM log_head",
          entriesInsert([5]),
          entriesInsert([1]),
          // Several entries in one statement: the next number first but a gap after it, and
          // consecutive numbers that do not start at the head.
          entriesInsert([2, 4]),
          entriesInsert([3, 4]),
        ];
        for (const sql of statements) await expect(driver.transaction((tx) => tx.run(sql)), sql).rejects.toThrow();
        expect(await log.treeSize()).toBe(2);
      });
    });

    describe("checkpoints", () => {
      it("tick cuts at checkpoint_every pending entries, or after checkpoint_seconds with any pending", async () => {
        const { driver, log, clock } = await openTestLog({ checkpoint_every: 5, checkpoint_seconds: 10 });
        expect(await log.tick()).toBeUndefined();
        await driver.transaction((tx) => log.appendMany(tx, [decision(1), decision(2), decision(3)]));
        expect(await log.tick()).toBeUndefined();
        clock.advance(10_000);
        expect((await log.tick())!.size).toBe(4);
        await driver.transaction((tx) => log.appendMany(tx, [1, 2, 3, 4, 5].map(decision)));
        expect((await log.tick())!.size).toBe(9);
        clock.advance(60_000);
        expect(await log.tick()).toBeUndefined();
      });

      it("cuts a timed checkpoint after checkpoint_seconds of the process's own time when the latest is stamped ahead of the clock", async () => {
        let monotonic_ms = 0;
        const { driver, log, clock } = await openTestLog({ checkpoint_every: 1000, checkpoint_seconds: 10, monotonic_ms: () => monotonic_ms });
        const day_ms = 86_400_000;
        clock.advance(day_ms); // a host clock that ran a day ahead ...
        await driver.transaction((tx) => log.appendMany(tx, [decision(1)]));
        expect((await log.checkpoint()).size).toBe(2);
        clock.advance(-day_ms); // ... and was corrected: the latest checkpoint now looks a day newer than now
        await driver.transaction((tx) => log.appendMany(tx, [decision(2)]));
        expect(await log.tick()).toBeUndefined();
        monotonic_ms += 9_999;
        expect(await log.tick()).toBeUndefined();
        monotonic_ms += 1;
        expect((await log.tick())!.size).toBe(3);
      });

      it("never signs a tree inconsistent with an earlier checkpoint", async () => {
        const { driver, log } = await openTestLog();
        await driver.transaction((tx) => log.appendMany(tx, [decision(1), decision(2)]));
        // A checkpoint for size 2 whose root is not this tree's: as if history had been rewritten.
        await driver.transaction((tx) =>
          tx.run("INSERT INTO log_checkpoints (tree_size, root_hash, note, created_at) VALUES (2, ?, 'forged', ?)", ["ab".repeat(32), "2026-01-01T00:00:00Z"]),
        );
        await expect(log.checkpoint()).rejects.toBeInstanceOf(EvidenceIntegrityError);
        expect((await log.latestCheckpoint())!.size).toBe(2);
      });

      it("refuses to sign once the stored log lost entries this process saw (a restore, a failover), before and after it grows back", async () => {
        const { driver, log } = await openTestLog();
        await driver.transaction((tx) => log.appendMany(tx, [1, 2, 3, 4].map(decision)));
        expect((await log.checkpoint()).size).toBe(5);
        // Entries 3 and 4 are lost, as a database restored to an earlier point would lose them.
        await loseEntriesFrom(driver, 3);
        await expect(log.checkpoint()).rejects.toThrow(/3 entries stored, 5 seen/);
        // Nor is anything appended at seqs the signed checkpoint covers: its receipt would be a
        // second, conflicting signature for that seq.
        await expect(driver.transaction((tx) => log.appendMany(tx, [5, 6].map(decision)))).rejects.toThrow(/3 entries stored, 5 seen/);
        expect(await log.treeSize()).toBe(3);
        expect((await log.latestCheckpoint())!.size).toBe(5);
      });

      it("a log just opened has seen the stored log: it refuses to append or sign over entries lost before its first checkpoint", async () => {
        const { driver, log, signer, clock } = await openTestLog();
        await driver.transaction((tx) => log.appendMany(tx, [1, 2, 3, 4].map(decision)));
        // Another process starts (a rolling restart) and cuts no checkpoint before the database is
        // restored to an earlier point: entries 3 and 4 are lost.
        const started = await EvidenceLog.open(driver, { signer, origin: test_origin, clock });
        await loseEntriesFrom(driver, 3);
        await expect(driver.transaction((tx) => started.appendMany(tx, [5, 6].map(decision)))).rejects.toThrow(/3 entries stored, 5 seen/);
        await expect(started.checkpoint()).rejects.toThrow(/3 entries stored, 5 seen/);
        expect(await log.treeSize()).toBe(3);
      });

      it("refuses a checkpoint when the log lost entries another process appended and then grew back over them", async () => {
        const { driver, log, signer, clock } = await openTestLog();
        await driver.transaction((tx) => log.appendMany(tx, [1, 2, 3, 4].map(decision)));
        expect((await log.checkpoint()).size).toBe(5);
        // Entry 4 is lost, and another writer, which never saw it, grows the log back.
        await loseEntriesFrom(driver, 4);
        const other = await EvidenceLog.open(driver, { signer, origin: test_origin, clock });
        await driver.transaction((tx) => other.appendMany(tx, [5, 6, 7].map(decision)));
        await expect(log.checkpoint()).rejects.toThrow(/entry 4 differs/);
        await expect(log.checkpoint()).rejects.toBeInstanceOf(EvidenceIntegrityError);
        expect((await log.latestCheckpoint())!.size).toBe(5);
      });

      it("serves inclusion and consistency proofs that verify against signed checkpoints", async () => {
        const { driver, log } = await openTestLog();
        const verifier = parseVerifierKey(log.verifierKey);
        await driver.transaction((tx) => log.appendMany(tx, Array.from({ length: 20 }, (_, i) => decision(i))));
        const older = await log.checkpoint();
        await driver.transaction((tx) => log.appendMany(tx, Array.from({ length: 17 }, (_, i) => decision(i))));
        const newer = await log.checkpoint();
        expect([older.size, newer.size]).toEqual([21, 38]);
        for (const index of [0, 5, 20]) {
          const proof = await log.inclusionProof(index, newer.size);
          expect(proof.checkpoint).toBe(newer.note);
          expect(checkInclusionDocument(proof, verifier)).toEqual({ ok: true });
          expect(checkInclusionDocument({ ...proof, leaf_hash: "00".repeat(32) }, verifier).ok).toBe(false);
        }
        const consistency = await log.consistencyProof(older.size, newer.size);
        expect(checkConsistencyDocument(consistency, verifier)).toEqual({ ok: true, older: null, newer: null });
        const unsigned = await log.inclusionProof(3, 30);
        expect(unsigned.checkpoint).toBeNull();
        expect(checkInclusionDocument(unsigned, verifier).ok).toBe(false);
      });

      it("rejects proof requests beyond the tree, naming the parameter", async () => {
        const { log } = await openTestLog();
        await expect(log.inclusionProof(0, 2)).rejects.toMatchObject({ param: "size", limit: 1 });
        await expect(log.inclusionProof(1, 1)).rejects.toMatchObject({ param: "index" });
        await expect(log.consistencyProof(2, 1)).rejects.toMatchObject({ param: "from" });
        await expect(log.entries(0, 1001)).rejects.toBeInstanceOf(EvidenceRangeError);
      });
    });
  });
}
