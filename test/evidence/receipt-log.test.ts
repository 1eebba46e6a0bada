// Receipts name their log (v2): two logs under one signing key (staging and prod, or a store
// reset under the same origin) issue receipts that verify only as their own. Entries and
// receipts of another log appended past a genuine export's last checkpoint are refused, and so
// is another log's delivery receipt; v1 receipts, written before, still verify where a signed
// checkpoint covers their entries.

import { generateKeyPairSync, sign } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as verifyCommand from "../../src/cli/commands/verify.js";
import { canonicalJson } from "../../src/evidence/canonical.js";
import { buildEntry } from "../../src/evidence/entry.js";
import { exportLog } from "../../src/evidence/export.js";
import { createLogSigner, type LogSigner } from "../../src/evidence/keys.js";
import { parseVerifierKey } from "../../src/evidence/note.js";
import { leafHash } from "../../src/evidence/merkle.js";
import { deliveryMessage, signReceiptFields, verifyDeliveryReceipt, verifyReceipt, type DeliveryReceipt, type Receipt } from "../../src/evidence/receipt.js";
import { EvidenceLog } from "../../src/evidence/store.js";
import {
  capturedIo,
  checkpointLineSize as checkpointSize,
  exportAt,
  isCheckpointLine as isCheckpoint,
  isEntryLine as isEntry,
  isReceiptLine as isReceipt,
  migratedDriver,
  openTestLog,
  steppingClock,
  tempDir,
  verifyLines,
  type Exported,
  type TestLog,
} from "./support.js";

const prod_origin = "prod.example/log";
const staging_origin = "staging.example/log";
/** The size of prod's export: the auditor's trusted checkpoint, and where spliced entries start. */
const exported_size = 5;

async function appendDecisions(t: TestLog, count: number, label: string): Promise<void> {
  for (let n = 0; n < count; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, label, effect: "ALLOW", amount: 100 } }));
  }
}

/** The export without the checkpoint lines above `size`: entries past it are the tail. */
const withoutCheckpointsAbove = (lines: string[], size: number) => lines.filter((line) => !isCheckpoint(line) || checkpointSize(line) <= size);

/**
 * The reviewer's splice: `genuine` with the entries of `other` from seq `from` on appended, with
 * their receipts (key_id rewritten to `key_id`: it is not signed) and without its checkpoint lines.
 */
function splice(genuine: string[], other: string[], from: number, key_id: string, relabel: (receipt: Record<string, unknown>) => void = () => {}): string[] {
  const extra: string[] = [];
  let seq = -1;
  for (const line of other.slice(1)) {
    if (isEntry(line)) seq = (JSON.parse(line) as { seq: number }).seq;
    if (seq < from || isCheckpoint(line)) continue;
    if (!isReceipt(line)) {
      extra.push(line);
      continue;
    }
    const { receipt } = JSON.parse(line) as { receipt: Record<string, unknown> };
    receipt.key_id = key_id;
    relabel(receipt);
    extra.push(canonicalJson({ receipt }));
  }
  return [...genuine, ...extra];
}

interface Logs {
  key: ReturnType<typeof generateKeyPairSync>["privateKey"];
  prod: TestLog;
  staging: TestLog;
  /** Prod's store reset: same key, same origin, a new genesis. */
  reset: TestLog;
  /** Prod's export at exported_size, ending on its signed checkpoint. */
  exported: Exported;
}

let logs: Logs;

beforeAll(async () => {
  const { privateKey } = generateKeyPairSync("ed25519");
  const prod = await openTestLog({ signer: createLogSigner(privateKey, prod_origin), origin: prod_origin });
  await appendDecisions(prod, exported_size - 1, "prod");
  await prod.log.checkpoint();
  const staging = await openTestLog({ signer: createLogSigner(privateKey, staging_origin), origin: staging_origin });
  await appendDecisions(staging, 8, "staging");
  await staging.log.checkpoint();
  // A reset a day later: its genesis differs from prod's first one in received_at alone.
  const clock = steppingClock(Date.parse("2026-01-02T00:00:00.000Z"));
  const reset = await openTestLog({ signer: createLogSigner(privateKey, prod_origin), origin: prod_origin, clock });
  await appendDecisions(reset, 8, "reset");
  await reset.log.checkpoint();
  logs = { key: privateKey, prod, staging, reset, exported: await exportAt(prod, exported_size) };
});

describe("entries of another log under the same key, appended past a genuine export's last checkpoint", () => {
  it("the honest export verifies, and names its log: the leaf hash of its entry 0", () => {
    const report = verifyLines(logs.exported, logs.exported.lines);
    expect(report.failure).toBeUndefined();
    expect(report.log).toBe(logs.prod.log.logId);
    expect(verifyLines(logs.exported, logs.exported.lines, { allReceipts: true }).ok).toBe(true);
  });

  it("are refused when they come from a staging log (another origin), even with their log relabelled", async () => {
    const staging = await exportAt(logs.staging, await logs.staging.log.treeSize());
    const spliced = splice(logs.exported.lines, staging.lines, exported_size, logs.prod.signer.keyIdHex);
    const report = verifyLines(logs.exported, spliced);
    expect(report.ok).toBe(false);
    expect(report.failure).toMatchObject({ seq: exported_size });
    // Signed as staging's, it does not verify as one of prod's origin, and nothing else vouches for the entry.
    expect(report.failure!.message).toBe(
      `seq ${exported_size}: its receipt names another log (log "${logs.staging.log.logId}") and does not verify (receipt signature does not verify as one of origin "prod.example/log"), and no signed checkpoint covers the entry`,
    );
    // The log a receipt names is signed with the origin: relabelled to prod's, the signature fails.
    const relabelled = splice(logs.exported.lines, staging.lines, exported_size, logs.prod.signer.keyIdHex, (receipt) => void (receipt.log = logs.prod.log.logId));
    const again = verifyLines(logs.exported, relabelled);
    expect(again.failure).toMatchObject({ seq: exported_size });
    expect(again.failure!.message).toMatch(/receipt does not verify \(receipt signature does not verify as one of origin "prod\.example\/log"\)/);
  });

  it("are refused when they come from a reset store under the same origin, even with their log relabelled", async () => {
    const reset = await exportAt(logs.reset, await logs.reset.log.treeSize());
    const spliced = splice(logs.exported.lines, reset.lines, exported_size, logs.prod.signer.keyIdHex);
    const report = verifyLines(logs.exported, spliced);
    expect(report.ok).toBe(false);
    expect(logs.reset.log.logId).not.toBe(logs.prod.log.logId);
    expect(report.failure).toMatchObject({ seq: exported_size });
    expect(report.failure!.message).toBe(`seq ${exported_size}: its receipt is of another log (log "${logs.reset.log.logId}"; this export's entry 0 has leaf hash ${logs.prod.log.logId})`);
    const relabelled = splice(logs.exported.lines, reset.lines, exported_size, logs.prod.signer.keyIdHex, (receipt) => void (receipt.log = logs.prod.log.logId));
    for (const allReceipts of [false, true]) {
      const again = verifyLines(logs.exported, relabelled, { allReceipts });
      expect(again.failure, `allReceipts ${allReceipts}`).toMatchObject({ seq: exported_size, message: expect.stringMatching(/receipt does not verify/) });
    }
  });

  it("of this log, past the last checkpoint, still verify on their v2 receipts", async () => {
    const grown = await openTestLog({ signer: createLogSigner(logs.key, prod_origin), origin: prod_origin });
    await appendDecisions(grown, exported_size - 1, "grown");
    const trusted = await grown.log.checkpoint();
    await appendDecisions(grown, 3, "more");
    await grown.log.checkpoint();
    const all = await exportAt(grown, await grown.log.treeSize());
    const report = verifyLines(all, withoutCheckpointsAbove(all.lines, trusted.size), { checkpoint: trusted.note });
    expect(report.failure).toBeUndefined();
    expect(report).toMatchObject({ ok: true, uncovered: 3, receipts: 3 });
  });
});

describe("a receipt naming another log, on an entry a checkpoint covers", () => {
  // Entry 0's receipt names the log by entry 0's own leaf hash: an altered entry 0 under its own
  // receipt and an intact one under another log's genesis receipt read alike, and both are named.
  const entry0 = "seq 0: entry altered, or its receipt is entry 0's of another log under the same key: its leaf hash differs from its signed receipt";

  it("an altered entry 0 (which makes the log id) is named as altered, or as carrying another log's genesis receipt", () => {
    const index = logs.exported.lines.findIndex(isEntry);
    const lines = logs.exported.lines.map((line, i) => (i === index ? line.replace('"version":"0.1.0"', '"version":"0.1.1"') : line));
    expect(lines[index]).toContain('"version":"0.1.1"');
    expect(verifyLines(logs.exported, lines).failure).toMatchObject({ seq: 0, message: entry0 });
  });

  it("an intact entry 0 under the genesis receipt of another log with the same key is not called altered alone", async () => {
    const reset = await exportAt(logs.reset, 1);
    const theirs = reset.lines.find((line) => isReceipt(line) && line.includes('"seq":0,'))!;
    const index = logs.exported.lines.findIndex((line) => isReceipt(line) && line.includes('"seq":0,'));
    const lines = logs.exported.lines.map((line, i) => (i === index ? theirs : line));
    expect(lines[index]).not.toBe(logs.exported.lines[index]);
    expect(verifyLines(logs.exported, lines).failure).toMatchObject({ seq: 0, message: entry0 });
  });

  it("is refused when the key signed it for another log: every v2 receipt must name the export's entry 0", () => {
    const index = logs.exported.lines.findIndex((line) => isReceipt(line) && line.includes('"seq":2,'));
    const { receipt } = JSON.parse(logs.exported.lines[index]!) as { receipt: Receipt };
    const theirs = signReceiptFields(logs.prod.signer, receipt, { origin: prod_origin, log: logs.reset.log.logId });
    const lines = logs.exported.lines.map((line, i) => (i === index ? canonicalJson({ receipt: theirs }) : line));
    for (const allReceipts of [false, true]) {
      expect(verifyLines(logs.exported, lines, { allReceipts }).failure, `allReceipts ${allReceipts}`).toEqual({
        seq: 2,
        line: index + 1,
        message: `seq 2: its receipt is of another log (log "${logs.reset.log.logId}"; this export's entry 0 has leaf hash ${logs.prod.log.logId})`,
      });
    }
  });

  it("whose log alone was altered is a damaged receipt line, named by the file, not an entry: without the line the export verifies", () => {
    // The reviewer's case: "log" is signed, so the signature no longer verifies; the entry is intact.
    const index = logs.exported.lines.findIndex((line) => isReceipt(line) && line.includes('"seq":2,'));
    const lines = logs.exported.lines.map((line, i) => (i === index ? line.replace(logs.prod.log.logId, logs.reset.log.logId) : line));
    expect(lines[index]).toContain(logs.reset.log.logId);
    for (const allReceipts of [false, true]) {
      expect(verifyLines(logs.exported, lines, { allReceipts }).failure, `allReceipts ${allReceipts}`).toEqual({
        file: true,
        line: index + 1,
        message: `line ${index + 1}: the receipt of seq 2 names another log (log "${logs.reset.log.logId}") and does not verify (receipt signature does not verify as one of origin "prod.example/log"): the receipt line was altered; a signed checkpoint covers the entry`,
      });
    }
    expect(verifyLines(logs.exported, lines.filter((_, i) => i !== index)).ok).toBe(true);
    // Altered along with its entry (and the receipt's leaf hash to match), the entry is named by
    // the range its signed root disagrees with, and the receipt, which does not verify, as the suspect within it.
    const entry = index - 1;
    const altered = lines[entry]!.replace('"amount":100', '"amount":101');
    const leaf = leafHash(Buffer.from(altered, "utf8")).toString("hex");
    const both = lines.map((line, i) => (i === entry ? altered : i === index ? line.replace(/"leaf_hash":"[0-9a-f]{64}"/, `"leaf_hash":"${leaf}"`) : line));
    expect(verifyLines(logs.exported, both).failure).toEqual({
      range: [1, 5],
      line: index + 1,
      message: `entries 1..4 do not match the signed checkpoint of size 5; within them, seq 2: its receipt names another log (log "${logs.reset.log.logId}") and does not verify (receipt signature does not verify as one of origin "prod.example/log"): that entry, or its receipt, was altered`,
    });
  });

  it("names an altered entry 0 whose receipt and first checkpoint are gone by the range that holds it, not the next entry", () => {
    // Entry 0 makes the log id, so every genuine receipt after it then names another log.
    const genesis = logs.exported.lines.findIndex(isEntry);
    const lines = logs.exported.lines
      .map((line, i) => (i === genesis ? line.replace('"version":"0.1.0"', '"version":"0.1.1"') : line))
      .filter((line, i) => !(isReceipt(line) && i === genesis + 1) && !(isCheckpoint(line) && checkpointSize(line) === 1));
    expect(lines.filter(isCheckpoint).map(checkpointSize)).toEqual([exported_size]);
    const report = verifyLines(logs.exported, lines);
    expect(report.failure).toMatchObject({ range: [0, exported_size], message: `entries 0..${exported_size - 1} do not match the signed checkpoint of size ${exported_size}` });
    expect(report.failure!.seq).toBeUndefined();
    // Stopped by a later damaged line before any signed root is checked, it names the range from
    // entry 0, which may be what was altered, to the entry: not entry 1 as known bad.
    const junk = lines.findIndex((line) => isEntry(line) && line.includes('"n":2,'));
    const early = verifyLines(logs.exported, [...lines.slice(0, junk), "garbage", ...lines.slice(junk)]).failure!;
    expect(early).toMatchObject({ range: [0, 2], line: genesis + 3, message: expect.stringMatching(/^seq 1: its receipt is of another log \(.*\), or entry 0 was altered \(the log id is entry 0's leaf hash/) });
    expect(early.seq).toBeUndefined();
  });
});

describe("a receipt naming another log that does not verify, on an entry whose signed root is not verified yet", () => {
  // Signed checkpoints at 1, 4, 7 and 10: entry 4 lies under the one of size 7.
  let ten: Exported;
  let receiptIndex: number;
  /** Entry 4 altered, its receipt's leaf_hash rewritten to match and its log to another's, which its signature does not sign. */
  let tampered: string[];
  const reason = `receipt signature does not verify as one of origin "${prod_origin}"`;
  const named = () => `seq 4: its receipt names another log (log "${logs.reset.log.logId}") and does not verify (${reason})`;

  beforeAll(async () => {
    const t = await openTestLog({ signer: createLogSigner(logs.key, prod_origin), origin: prod_origin });
    for (const size of [4, 7, 10]) {
      await appendDecisions(t, size - (await t.log.treeSize()), "ten");
      await t.log.checkpoint();
    }
    ten = await exportAt(t, 10);
    expect(ten.lines.filter(isCheckpoint).map(checkpointSize)).toEqual([1, 4, 7, 10]);
    const entry = ten.lines.findIndex((line) => isEntry(line) && line.includes('"seq":4,'));
    receiptIndex = entry + 1;
    const altered = ten.lines[entry]!.replace('"amount":100', '"amount":101');
    const leaf = leafHash(Buffer.from(altered, "utf8")).toString("hex");
    const receipt = ten.lines[receiptIndex]!.replace(/"leaf_hash":"[0-9a-f]{64}"/, `"leaf_hash":"${leaf}"`).replace(t.log.logId, logs.reset.log.logId);
    tampered = ten.lines.map((line, i) => (i === entry ? altered : i === receiptIndex ? receipt : line));
    expect(receipt).toContain(logs.reset.log.logId);
  });

  it("is named as the suspect beside the range its signed root disagrees with, as a receipt whose leaf hash alone was rewritten is", () => {
    expect(verifyLines(ten, tampered).failure).toEqual({
      range: [4, 7],
      line: receiptIndex + 1,
      message: `entries 4..6 do not match the signed checkpoint of size 7; within them, ${named()}: that entry, or its receipt, was altered`,
    });
    // Every signature checked, it is named at its entry, as any receipt that does not verify there.
    expect(verifyLines(ten, tampered, { allReceipts: true }).failure).toEqual({ seq: 4, line: receiptIndex + 1, message: named() });
  });

  it("stopped before that root by a damaged line or the export's end, names the entry, not a damaged receipt line under a signed root", () => {
    // Before, both said "the receipt line was altered; a signed checkpoint covers the entry", with
    // the file to blame: the checkpoint of size 7 had not been read, the trusted one not checked.
    const nextEntry = receiptIndex + 1;
    const junk = [...tampered.slice(0, nextEntry), "garbage", ...tampered.slice(nextEntry)];
    const truncated = tampered.slice(0, nextEntry);
    for (const [name, lines] of [
      ["junk", junk],
      ["truncated", truncated],
    ] as const) {
      expect(verifyLines(ten, lines).failure, name).toEqual({ seq: 4, line: receiptIndex + 1, message: named() });
    }
    // Entry 4 intact, only its receipt line altered: with the root of size 7 verified, the line is to blame.
    const lineAlone = ten.lines.map((line, i) => (i === receiptIndex ? line.replace(/"log":"[0-9a-f]{64}"/, `"log":"${logs.reset.log.logId}"`) : line));
    expect(verifyLines(ten, lineAlone).failure).toMatchObject({ file: true, line: receiptIndex + 1 });
  });
});

/** A v1 receipt's signature, as Bursar wrote them before receipts named their log. */
function v1Signature(signer: LogSigner, fields: { seq: number; leaf_hash: string; kind: string; at: string }): string {
  const { seq, leaf_hash, kind, at } = fields;
  return sign(null, Buffer.from(`bursar/receipt/v1\n${canonicalJson({ seq, leaf_hash, kind, at })}`, "utf8"), signer.privateKey).toString("base64");
}

/** Rows as an earlier Bursar stored them: entry text, leaf hash and a bare v1 receipt signature. */
async function insertV1Rows(t: { driver: TestLog["driver"] }, signer: LogSigner, inputs: Array<Parameters<typeof buildEntry>[0]>, first: number, at: string): Promise<void> {
  await t.driver.transaction(async (tx) => {
    for (const [i, input] of inputs.entries()) {
      const { entry, text, leafHash } = buildEntry(input, first + i, at);
      const leaf_hash = leafHash.toString("hex");
      const signature = v1Signature(signer, { seq: entry.seq, leaf_hash, kind: entry.kind, at });
      await tx.run("INSERT INTO log_entries (seq, kind, source, received_at, entry_text, leaf_hash, receipt_signature) VALUES (?, ?, ?, ?, ?, ?, ?)", [
        entry.seq,
        entry.kind,
        entry.source,
        at,
        text,
        leaf_hash,
        signature,
      ]);
    }
  });
}

describe("a log upgraded from v1 receipts", () => {
  let upgraded: { log: EvidenceLog; driver: TestLog["driver"]; exported: Exported; at1: string; at4: string };

  beforeAll(async () => {
    const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, prod_origin);
    const driver = await migratedDriver();
    const genesis = { origin: prod_origin, key: signer.verifierKey, key_id: signer.keyIdHex, version: "0.1.0", log_format: 1 };
    await insertV1Rows({ driver }, signer, [{ kind: "system.genesis", source: "system", body: genesis }], 0, "2025-12-01T00:00:00.000Z");
    const clock = steppingClock();
    const log = await EvidenceLog.open(driver, { signer, origin: prod_origin, clock });
    const at1 = (await log.latestCheckpoint())!.note;
    const decisions = [1, 2, 3].map((n) => ({ kind: "gate.decision", source: "gate", body: { n, legacy: true } }));
    await insertV1Rows({ driver }, signer, decisions, 1, "2025-12-01T00:00:01.000Z");
    const at4 = (await log.checkpoint()).note;
    // After the upgrade: v2 receipts.
    for (let n = 4; n < 7; n++) await driver.transaction((tx) => log.append(tx, { kind: "gate.decision", source: "gate", body: { n } }));
    const final = await log.checkpoint();
    const chunks: string[] = [];
    await exportLog(driver, { size: final.size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
    upgraded = { log, driver, exported: { lines: chunks.join("").split("\n").filter(Boolean), checkpoint: final.note, key: log.verifierKey }, at1, at4 };
  });
  afterAll(async () => upgraded.driver.close());

  it("serves v1 receipts without a log and v2 receipts with one, each verifying", async () => {
    const verifier = parseVerifierKey(upgraded.log.verifierKey);
    const stored = await upgraded.log.entries(0, 7);
    expect(stored.map((entry) => entry.receipt?.log)).toEqual([undefined, undefined, undefined, undefined, upgraded.log.logId, upgraded.log.logId, upgraded.log.logId]);
    for (const entry of stored) expect(verifyReceipt(entry.receipt!, verifier), `seq ${entry.seq}`).toEqual({ ok: true });
    const receiptLines = upgraded.exported.lines.filter(isReceipt).map((line) => (JSON.parse(line) as { receipt: { log?: string } }).receipt.log);
    expect(receiptLines).toEqual(stored.map((entry) => entry.receipt!.log));
  });

  it("verifies where checkpoints cover the v1 entries, every receipt signature checked too", () => {
    expect(verifyLines(upgraded.exported, upgraded.exported.lines).failure).toBeUndefined();
    const all = verifyLines(upgraded.exported, upgraded.exported.lines, { allReceipts: true });
    expect(all.failure).toBeUndefined();
    expect(all.receipts).toBe(7);
  });

  it("vouches for tail entries by their v2 receipts only: a v1 receipt past every checkpoint fails, saying why", () => {
    const withoutLater = (size: number) => withoutCheckpointsAbove(upgraded.exported.lines, size);
    const v2Tail = verifyLines(upgraded.exported, withoutLater(4), { checkpoint: upgraded.at4 });
    expect(v2Tail.failure).toBeUndefined();
    expect(v2Tail.uncovered).toBe(3);
    for (const allReceipts of [false, true]) {
      const v1Tail = verifyLines(upgraded.exported, withoutLater(1), { checkpoint: upgraded.at1, allReceipts });
      expect(v1Tail.failure, `allReceipts ${allReceipts}`).toMatchObject({ seq: 1 });
      expect(v1Tail.failure!.message).toBe(
        "seq 1: its receipt is v1, which does not name its log, and no signed checkpoint covers the entry (only a v2 receipt of this log vouches for it)",
      );
    }
  });
});

describe("receipt signatures", () => {
  /** Re-signs until the base64 signature holds a "+" or a "/": the URL-safe alphabet writes those as "-" and "_". */
  function withSpecials<T extends { signature: string }>(signed: (n: number) => T): T {
    for (let n = 0; n < 100; n++) {
      const receipt = signed(n);
      if (/[+/]/.test(receipt.signature)) return receipt;
    }
    throw new Error("no signature with + or / in 100 tries");
  }
  const variants = (signature: string) => ({
    unpadded: signature.replace(/=+$/, ""),
    url_safe: signature.replace(/\+/g, "-").replace(/\//g, "_"),
    url_safe_unpadded: signature.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
  });

  it("of an entry receipt verify only in strict, padded standard base64, as a checkpoint's do", () => {
    const verifier = parseVerifierKey(logs.prod.log.verifierKey);
    const receipt = withSpecials((n) =>
      signReceiptFields(logs.prod.signer, { seq: 1, leaf_hash: "a".repeat(64), kind: "gate.decision", at: `2026-01-01T00:00:${String(n % 60).padStart(2, "0")}.${n}Z` }, { origin: prod_origin, log: logs.prod.log.logId }),
    );
    expect(verifyReceipt(receipt, verifier)).toEqual({ ok: true });
    for (const [name, signature] of Object.entries(variants(receipt.signature))) {
      expect(signature, name).not.toBe(receipt.signature);
      expect(verifyReceipt({ ...receipt, signature }, verifier), name).toMatchObject({ ok: false });
    }
  });

  it("of a delivery receipt verify only in strict, padded standard base64", () => {
    const verifier = parseVerifierKey(logs.prod.log.verifierKey);
    const records = [{ event_id: "evt_1", seq: 1, leaf_hash: "a".repeat(64), sha256: "b".repeat(64), occurred_at: "2026-01-01T00:00:00Z", received_at: "2026-01-01T00:00:00.000Z" }];
    const receipt = withSpecials((n) => logs.prod.log.signDelivery({ source: `src_${n}`, received_at: "2026-01-01T00:00:00.000Z", records }));
    expect(verifyDeliveryReceipt(receipt, verifier)).toEqual({ ok: true });
    for (const [name, signature] of Object.entries(variants(receipt.signature))) {
      expect(verifyDeliveryReceipt({ ...receipt, signature }, verifier), name).toMatchObject({ ok: false });
    }
  });

  it("past every signed checkpoint, an unpadded variant of a genuine receipt's signature vouches for nothing", () => {
    const tail = withoutCheckpointsAbove(logs.exported.lines, 1);
    const older = (JSON.parse(tail.filter(isCheckpoint).at(-1)!) as { checkpoint: string }).checkpoint;
    expect(verifyLines(logs.exported, tail, { checkpoint: older }).ok).toBe(true);
    const index = tail.findIndex((line) => isReceipt(line) && line.includes('"seq":3,'));
    const lines = tail.map((line, i) => (i === index ? line.replace(/=+"\}\}$/, '"}}') : line));
    expect(lines[index]).not.toBe(tail[index]);
    expect(verifyLines(logs.exported, lines, { checkpoint: older }).failure).toMatchObject({ seq: 3, message: expect.stringMatching(/^seq 3: receipt does not verify/) });
  });
});

describe("delivery receipts of another log under the same key", () => {
  const dir = tempDir();
  afterAll(() => dir.remove());
  const records = (seq: number, leaf_hash: string) => [
    { event_id: "evt_1", seq, leaf_hash, sha256: "b".repeat(64), occurred_at: "2026-01-01T00:00:00Z", received_at: "2026-01-01T00:00:00.000Z" },
  ];
  const entryLeaf = async (t: TestLog, seq: number) => (await t.log.entries(seq, seq + 1))[0]!.leaf_hash;
  const run = async (lines: unknown[], args: string[] = []) => {
    const file = join(dir.path, `receipts-${Math.random().toString(36).slice(2)}.jsonl`);
    writeFileSync(file, lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
    const io = capturedIo();
    const code = await verifyCommand.run(["--delivery-receipts", file, "--key", logs.prod.log.verifierKey, ...args], io);
    return { code, out: io.out(), err: io.err().replace(file, "RECEIPTS") };
  };
  const exportArgs = () => {
    const file = join(dir.path, "prod.jsonl");
    const cp = join(dir.path, "prod.cp");
    writeFileSync(file, logs.exported.lines.map((line) => `${line}\n`).join(""));
    writeFileSync(cp, logs.exported.checkpoint);
    return [file, "--checkpoint", cp];
  };

  it("a staging receipt relabelled as prod's is refused: its origin is signed", async () => {
    const staging = logs.staging.log.signDelivery({ source: "src_staging", received_at: "2026-12-03T00:00:00.000Z", records: records(3, "a".repeat(64)) });
    const relabelled = { ...staging, key_id: logs.prod.signer.keyIdHex };
    expect(verifyDeliveryReceipt(relabelled, parseVerifierKey(logs.prod.log.verifierKey))).toEqual({
      ok: false,
      reason: 'delivery receipt signature does not verify as one of origin "prod.example/log"',
    });
    expect(await run([relabelled])).toEqual({ code: 1, out: "", err: 'FAIL RECEIPTS line 1: delivery receipt signature does not verify as one of origin "prod.example/log"\n' });
    // Its log relabelled to prod's as well: still signed as staging's.
    expect((await run([{ ...relabelled, log: logs.prod.log.logId }])).code).toBe(1);
  });

  it("prod's own receipt verifies and names its log; a reset store's names another, and is refused beside prod's export", async () => {
    const leaf = await entryLeaf(logs.prod, 1);
    const own = logs.prod.log.signDelivery({ source: "src_1", received_at: "2026-01-01T00:00:00.000Z", records: records(1, leaf) });
    expect(own.log).toBe(logs.prod.log.logId);
    const alone = await run([own]);
    expect(alone).toMatchObject({ code: 0, err: "" });
    expect(alone.out).toBe(`OK 1 delivery receipts listing 1 records, signed by ${prod_origin}+${logs.prod.signer.keyIdHex} for log ${logs.prod.log.logId} of origin ${prod_origin}\n`);
    expect(await run([own], exportArgs())).toMatchObject({ code: 0, err: "" });

    // Same origin and key: its signature verifies, and it names the reset log, which the export is not.
    const reset = logs.reset.log.signDelivery({ source: "src_1", received_at: "2026-01-01T00:00:00.000Z", records: records(1, leaf) });
    const both = await run([own, reset]);
    expect(both.code).toBe(0);
    expect(both.out).toContain(`for 2 logs ${logs.prod.log.logId}, ${logs.reset.log.logId} of origin ${prod_origin}`);
    expect(await run([own, reset], exportArgs())).toEqual({
      code: 1,
      out: "",
      err: `FAIL RECEIPTS line 2: the receipt is of log ${logs.reset.log.logId}, not this export's log ${logs.prod.log.logId} (the leaf hash of its entry 0)\n`,
    });
  });

  it("quotes a listed record's event id cut at 80 characters, its control characters escaped", async () => {
    const event_id = `evt_\u009b2J\u001b[2K${"x".repeat(200)}`;
    const listed = [{ ...records(99, "a".repeat(64))[0]!, event_id }];
    const receipt = logs.prod.log.signDelivery({ source: "src_1", received_at: "2026-01-01T00:00:00.000Z", records: listed });
    const result = await run([receipt], exportArgs());
    expect(result.code).toBe(1);
    expect(result.err).toBe(`FAIL RECEIPTS line 1: record ${JSON.stringify(event_id.slice(0, 80)).replace("\u009b", "\\u009b")}…: the export holds no entry 99 (it has ${exported_size})\n`);
  });

  it("a v1 receipt, stored before receipts named their log, still verifies, with a note that it names none", async () => {
    const leaf = await entryLeaf(logs.prod, 2);
    const fields = { source: "src_1", received_at: "2026-01-01T00:00:00.000Z", records: records(2, leaf) };
    const v1: DeliveryReceipt = { ...fields, key_id: logs.prod.signer.keyIdHex, signature: sign(null, deliveryMessage(fields), logs.prod.signer.privateKey).toString("base64") };
    const alone = await run([v1]);
    expect(alone.code).toBe(0);
    expect(alone.out).toBe(
      `OK 1 delivery receipts listing 1 records, signed by ${prod_origin}+${logs.prod.signer.keyIdHex}\n` +
        "note: 1 v1 receipts (line 1) do not name their log: they verify under the key alone, as a receipt of any log signed with it would\n",
    );
    const bound = await run([v1], exportArgs());
    expect(bound.code).toBe(0);
    expect(bound.out).toMatch(/; every record is in .* and the export verifies .*\nnote: 1 v1 receipts \(line 1\)/);
  });
});
