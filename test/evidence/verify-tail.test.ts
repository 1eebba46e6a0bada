// Entries past every signed checkpoint (the trusted one and those in the file) rest on their
// receipts alone: verify checks those receipts' signatures and the entries' seq, and fails on a
// tail entry that nothing signed vouches for.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { exportLog } from "../../src/evidence/export.js";
import { leafHash } from "../../src/evidence/merkle.js";
import { signReceiptFields } from "../../src/evidence/receipt.js";
import {
  bufferLines,
  export_line_bytes_max,
  fileLines,
  tail_receipts_deferred_max,
  verify_read_chunk_bytes,
  verifyExportFile,
  verifyExportLines,
  type VerifyReport,
} from "../../src/evidence/verify.js";
import { openTestLog, tempDir, type TestLog } from "./support.js";

const entry_count = 12;
const trusted_size = 5;

interface Exported {
  lines: string[];
  /** The signed checkpoint of size trusted_size, as an auditor kept it. */
  trusted: string;
  key: string;
  log: TestLog;
}

async function exportAll(t: TestLog, trustedSize: number): Promise<Exported> {
  const final = await t.log.checkpoint();
  const chunks: string[] = [];
  await exportLog(t.driver, { size: final.size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
  const stored = await t.driver.read((tx) => tx.get<{ note: string }>("SELECT note FROM log_checkpoints WHERE tree_size = ?", [trustedSize]));
  return { lines: chunks.join("").split("\n").filter(Boolean), trusted: stored!.note, key: t.log.verifierKey, log: t };
}

function verify(exported: Exported, lines: string[], allReceipts = false): VerifyReport {
  const bytes = Buffer.from(lines.map((line) => `${line}\n`).join(""), "utf8");
  return verifyExportLines(bufferLines(bytes), { checkpoint: exported.trusted, key: exported.key, allReceipts });
}

const isEntry = (line: string) => line.startsWith('{"body":');
const isReceipt = (line: string) => line.startsWith('{"receipt":');
const checkpointSize = (line: string) => (line.startsWith('{"checkpoint":') ? Number((JSON.parse(line) as { checkpoint: string }).checkpoint.split("\n")[1]) : undefined);

/** The export with every signed checkpoint line above `size` removed: entries past it are the tail. */
function withoutCheckpointsAbove(lines: string[], size: number): string[] {
  return lines.filter((line) => (checkpointSize(line) ?? 0) <= size);
}

/** Applies `edit` to the entry line of `seq` and (when it has one) the receipt line after it. */
function editEntry(lines: string[], seq: number, edit: (entry: string, receipt: string | undefined) => [string, string | undefined]): string[] {
  const index = indexOfEntry(lines, seq);
  expect(index).toBeGreaterThan(0);
  const receipt = isReceipt(lines[index + 1] ?? "") ? lines[index + 1] : undefined;
  const [entry, newReceipt] = edit(lines[index]!, receipt);
  const after = lines.slice(index + 1 + (receipt === undefined ? 0 : 1));
  return [...lines.slice(0, index), entry, ...(newReceipt === undefined ? [] : [newReceipt]), ...after];
}

function indexOfEntry(lines: string[], seq: number): number {
  let seen = -1;
  return lines.findIndex((line) => isEntry(line) && ++seen === seq);
}

/** A v2 receipt line with the exporter's layout for `entry` of the log `log`, carrying `signature`. */
function receiptLine(entry: string, seq: number, key_id: string, signature: string, log: string): string {
  const parsed = JSON.parse(entry) as { kind: string; received_at: string };
  const receipt = { at: parsed.received_at, key_id, kind: parsed.kind, leaf_hash: leafHash(Buffer.from(entry, "utf8")).toString("hex"), log, seq, signature };
  return JSON.stringify({ receipt });
}

let exported: Exported;

beforeAll(async () => {
  const t = await openTestLog();
  for (let n = 1; n < entry_count; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, tool: "create_order", effect: "ALLOW", amount: 100 * n } }));
    if (n + 1 === trusted_size || n + 1 === 9) await t.log.checkpoint();
  }
  exported = await exportAll(t, trusted_size);
});

describe("entries past every signed checkpoint", () => {
  it("verify on their receipts, every one of whose signatures is checked and counted", () => {
    const tail = withoutCheckpointsAbove(exported.lines, trusted_size);
    const report = verify(exported, tail);
    expect(report.failure).toBeUndefined();
    expect(report).toMatchObject({ ok: true, entries: entry_count, uncovered: entry_count - trusted_size });
    // Only the tail's receipts are checked; those under the trusted root are matched, not checked.
    expect(report.receipts).toBe(entry_count - trusted_size);
    expect(report.receipts_unchecked).toBe(trusted_size);
  });

  it("rewritten with receipts that carry a forged signature, fail at the first rewritten seq", () => {
    // The reviewer's attack: amounts and effects changed, entry 6 claims seq 5, receipts match
    // the new leaf hashes but their signature is not the key's.
    let forged = withoutCheckpointsAbove(exported.lines, trusted_size);
    const key_id = (JSON.parse(forged.find(isReceipt)!) as { receipt: { key_id: string } }).receipt.key_id;
    for (let seq = trusted_size; seq < entry_count; seq++) {
      forged = editEntry(forged, seq, (entry) => {
        let text = entry.replace(/"amount":\d+/, '"amount":99999999').replace('"effect":"ALLOW"', '"effect":"BLOCK"');
        if (seq === 6) text = text.replace('"seq":6', '"seq":5');
        return [text, receiptLine(text, seq, key_id, `${"A".repeat(86)}==`, exported.log.log.logId)];
      });
    }
    const report = verify(exported, forged);
    expect(report.ok).toBe(false);
    expect(report.failure).toMatchObject({ seq: trusted_size });
    expect(report.failure!.message).toMatch(/receipt does not verify/);
  });

  it("fail on a wrong seq even when the receipt's signature is the key's", () => {
    // Only the key holder can sign such a receipt; the entry must still claim its own position.
    const signer = exported.log.signer;
    const forged = editEntry(withoutCheckpointsAbove(exported.lines, trusted_size), 6, (entry) => {
      const text = entry.replace('"seq":6', '"seq":5');
      const parsed = JSON.parse(text) as { kind: string; received_at: string };
      const identity = { origin: exported.log.log.origin, log: exported.log.log.logId };
      const receipt = signReceiptFields(signer, { seq: 6, leaf_hash: leafHash(Buffer.from(text, "utf8")).toString("hex"), kind: parsed.kind, at: parsed.received_at }, identity);
      const { at, key_id, kind, leaf_hash, log, seq, signature } = receipt;
      return [text, JSON.stringify({ receipt: { at, key_id, kind, leaf_hash, log, seq, signature } })];
    });
    const report = verify(exported, forged);
    expect(report.failure).toMatchObject({ seq: 6 });
    expect(report.failure!.message).toMatch(/found seq 5 instead/);
  });

  it("fail when a receipt line names its entry first and carries another entry's genuine receipt after it", () => {
    // A reviewer's forgery: JSON.parse keeps a repeated key's last value, while the fast path
    // reads the first. Any agent holds genuine receipts; one must not vouch for a made-up entry.
    const tail = withoutCheckpointsAbove(exported.lines, trusted_size);
    const genuine = (JSON.parse(tail.filter(isReceipt).at(-1)!) as { receipt: Record<string, unknown> }).receipt;
    for (const seq of [trusted_size + 1, entry_count - 1]) {
      const forged = editEntry(tail, seq, (entry) => {
        const text = entry.replace(/"amount":\d+/, '"amount":1');
        const leaf = leafHash(Buffer.from(text, "utf8")).toString("hex");
        const fields = `"leaf_hash":"${genuine.leaf_hash}","log":"${genuine.log}","seq":${genuine.seq},"signature":"${genuine.signature}","kind":"${genuine.kind}","key_id":"${genuine.key_id}","at":"${genuine.at}"`;
        // Its head is the entry's own: at, key_id and kind as a genuine receipt of it has them.
        const own = JSON.parse(text) as { kind: string; received_at: string };
        const head = `"at":"${own.received_at}","key_id":"${String(genuine.key_id)}","kind":"${own.kind}"`;
        return [text, `{"receipt":{${head},"leaf_hash":"${leaf}","seq":${seq},"signature":"x",${fields}}}`];
      });
      const report = verify(exported, forged);
      expect(report.ok, `forged seq ${seq}`).toBe(false);
      expect(report.failure).toMatchObject({ seq });
      // Refused at its entry: a line with repeated keys is not read by position, and the genuine
      // receipt it parses to is another entry's, or this seq's for other content.
      const named = seq === genuine.seq ? /entry altered: its leaf hash differs from its signed receipt/ : /carries the receipt of another entry/;
      expect(report.failure!.message).toMatch(named);
    }
  });

  it("fail when one has no receipt; under a signed checkpoint a missing receipt is fine", () => {
    const stripReceipt = (lines: string[], seq: number) => editEntry(lines, seq, (entry) => [entry, undefined]);
    const tail = withoutCheckpointsAbove(exported.lines, 9);
    const report = verify(exported, stripReceipt(tail, 10));
    expect(report.ok).toBe(false);
    expect(report.failure).toMatchObject({ seq: 10 });
    expect(report.failure!.message).toMatch(/no receipt, and no signed checkpoint covers it/);
    // Entry 7 lies under the checkpoint of size 9 in the file: its content is signed there.
    expect(verify(exported, stripReceipt(tail, 7)).ok).toBe(true);
  });
});

describe("entries a later checkpoint in the file covers", () => {
  it("need no receipt signature check by default, and say so in the counts", () => {
    const key_id = (JSON.parse(exported.lines.find(isReceipt)!) as { receipt: { key_id: string } }).receipt.key_id;
    // A receipt whose signature is garbage, for an entry the checkpoint of size 9 covers.
    const lines = editEntry(exported.lines, 7, (entry) => [entry, receiptLine(entry, 7, key_id, `${"A".repeat(86)}==`, exported.log.log.logId)]);
    const report = verify(exported, lines);
    expect(report).toMatchObject({ ok: true, receipts: 0, receipts_unchecked: entry_count, uncovered: 0 });
    expect(verify(exported, lines, true).failure).toMatchObject({ seq: 7 });
  });
});

describe("a tail longer than the receipts verify holds back", () => {
  const tail_count = tail_receipts_deferred_max + 10;
  let long: Exported;

  beforeAll(async () => {
    const t = await openTestLog();
    for (let done = 0; done < tail_count; done += 1000) {
      const count = Math.min(1000, tail_count - done);
      await t.driver.transaction((tx) => t.log.appendMany(tx, Array.from({ length: count }, (_, i) => ({ kind: "gate.decision", source: "gate", body: { n: done + i } }))));
    }
    // The log's first checkpoint is of size 1 (genesis): everything after it is the tail.
    long = await exportAll(t, 1);
    long.lines = withoutCheckpointsAbove(long.lines, 1);
  });

  it("verifies every tail receipt, on both sides of the limit", () => {
    const report = verify(long, long.lines);
    expect(report.failure).toBeUndefined();
    expect(report).toMatchObject({ ok: true, entries: tail_count + 1, receipts: tail_count, receipts_unchecked: 1, uncovered: tail_count });
  });

  it("names a forged receipt or a missing one that left the queue early", () => {
    const index = indexOfEntry(long.lines, 2) + 1;
    const forged = long.lines.map((line, i) => (i === index ? line.replace(/"signature":"(.)/, (_, c: string) => `"signature":"${c === "A" ? "B" : "A"}`) : line));
    expect(verify(long, forged).failure).toMatchObject({ seq: 2, message: expect.stringMatching(/receipt does not verify/) });
    const stripped = long.lines.filter((_, i) => i !== index);
    expect(verify(long, stripped).failure).toMatchObject({ seq: 2, message: expect.stringMatching(/no receipt/) });
  });

  it("names a forged receipt still in the queue", () => {
    const seq = tail_count - 3;
    const index = indexOfEntry(long.lines, seq) + 1;
    const forged = long.lines.map((line, i) => (i === index ? line.replace(/"signature":"(.)/, (_, c: string) => `"signature":"${c === "A" ? "B" : "A"}`) : line));
    expect(verify(long, forged).failure).toMatchObject({ seq });
  });
});

describe("fileLines", () => {
  it("yields the same lines as splitting the whole file, for lines that span several read chunks and a last line without a newline", () => {
    const dir = tempDir();
    try {
      const chunk = verify_read_chunk_bytes;
      const lines = ["short", "x".repeat(chunk * 2 + 17), "", "y".repeat(chunk - 1), "z".repeat(chunk), "tail without newline"];
      const path = join(dir.path, "export.jsonl");
      writeFileSync(path, lines.join("\n"));
      expect([...fileLines(path)].map((line) => line.toString())).toEqual(lines);
    } finally {
      dir.remove();
    }
  });

  it("keeps only the first export_line_bytes_max + 1 bytes of a longer line and reads no further, and verify refuses it by its line number", () => {
    const dir = tempDir();
    try {
      const path = join(dir.path, "export.jsonl");
      const [header, ...rest] = exported.lines;
      writeFileSync(path, `${header}\n${rest[0]}\n{"body":"${"a".repeat(export_line_bytes_max * 3)}"}\n${rest.slice(1).join("\n")}\n`);
      const lengths = [...fileLines(path)].map((line) => line.length);
      expect(lengths).toEqual([header!.length, rest[0]!.length, export_line_bytes_max + 1]);
      const report = verifyExportFile(path, { checkpoint: exported.trusted, key: exported.key });
      expect(report.ok).toBe(false);
      expect(report.failure!.message).toBe(`line 3 is longer than ${export_line_bytes_max} bytes, which no export line is`);
    } finally {
      dir.remove();
    }
  });

  it("stops on a source with no newline at all (/dev/zero), which it read for ever", () => {
    const report = verifyExportFile("/dev/zero", { checkpoint: exported.trusted, key: exported.key });
    expect(report.failure!.message).toBe(`line 1 is longer than ${export_line_bytes_max} bytes, which no export line is`);
  });
});
