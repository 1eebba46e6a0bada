// Export and offline verify: a clean export verifies, and every kind of tampering is
// detected with the first bad seq, or the checkpoint range, named.

import { beforeAll, describe, expect, it } from "vitest";
import { exportLog } from "../../src/evidence/export.js";
import { bufferLines, verifyExportLines, type VerifyReport } from "../../src/evidence/verify.js";
import { newSigner, openTestLog, test_origin, type TestLog } from "./support.js";

const entry_count = 14;

interface Exported {
  bytes: Buffer;
  checkpoint: string;
  key: string;
}

async function buildLog(t: TestLog, bodies: (n: number) => Record<string, unknown>, cutAt: number[]): Promise<void> {
  for (let n = 1; n < entry_count; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: bodies(n) }));
    if (cutAt.includes(n + 1)) await t.log.checkpoint();
  }
}

async function exportAll(t: TestLog): Promise<Exported> {
  const final = await t.log.checkpoint();
  const chunks: string[] = [];
  await exportLog(t.driver, { size: final.size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
  return { bytes: Buffer.from(chunks.join(""), "utf8"), checkpoint: final.note, key: t.log.verifierKey };
}

function verify(bytes: Buffer, exported: Exported, overrides: { checkpoint?: string; key?: string; allReceipts?: boolean } = {}): VerifyReport {
  return verifyExportLines(bufferLines(bytes), { checkpoint: exported.checkpoint, key: exported.key, ...overrides });
}

function splitLines(bytes: Buffer): Buffer[] {
  return [...bufferLines(bytes)].map((line) => Buffer.from(line));
}

function joinLines(lines: Buffer[]): Buffer {
  return Buffer.concat(lines.flatMap((line) => [line, Buffer.from("\n")]));
}

/** Line indexes of entries, by seq. */
function entryLineIndexes(lines: Buffer[]): number[] {
  return lines.flatMap((line, i) => (line.toString("utf8").startsWith('{"body":') ? [i] : []));
}

let source: TestLog;
let exported: Exported;
let lines: Buffer[];
let entries: number[];

beforeAll(async () => {
  const t = await openTestLog();
  source = t;
  await buildLog(t, (n) => ({ n, tool: "create_order", args: { amount: 100 * n, currency: "INR", notes: { item: `chai ₹${n}` } } }), [5, 9]);
  exported = await exportAll(t);
  lines = splitLines(exported.bytes);
  entries = entryLineIndexes(lines);
});

describe("a clean export", () => {
  it("verifies every entry, receipt and checkpoint", () => {
    const report = verify(exported.bytes, exported, { allReceipts: true });
    expect(report.failure).toBeUndefined();
    expect(report).toMatchObject({ ok: true, entries: entry_count, receipts: entry_count, tree_size: entry_count, uncovered: 0 });
    // Checkpoints in the file at sizes 1 (open), 5, 9 and 14, plus the trusted one.
    expect(report.checkpoints).toBe(5);
    // A checkpoint line repeated is one checkpoint.
    const last = lines.at(-1)!;
    expect(last.toString()).toMatch(/^\{"checkpoint":/);
    expect(verify(joinLines([...lines, last, last, last]), exported).checkpoints).toBe(5);
  });

  it("writes each entry line as exactly the stored canonical bytes, led by a header", () => {
    expect(lines[0]!.toString()).toMatch(/^\{"bursar_export":\{/);
    expect(entries).toHaveLength(entry_count);
    const first = JSON.parse(lines[entries[3]!]!.toString()) as { seq: number };
    expect(first.seq).toBe(3);
  });
});

describe("tampering with entries is pinned to the entry", () => {
  it("flipping any single byte of any entry names that entry's seq and its line", () => {
    for (const [seq, index] of entries.entries()) {
      const line = lines[index]!;
      for (let offset = 0; offset < line.length; offset++) {
        const tampered = lines.map((l) => l);
        const copy = Buffer.from(line);
        copy[offset]! ^= 0x01;
        tampered[index] = copy;
        const report = verify(joinLines(tampered), exported);
        expect(report.ok, `seq ${seq} offset ${offset}`).toBe(false);
        expect(report.failure?.seq, `seq ${seq} offset ${offset}: ${report.failure?.message}`).toBe(seq);
        // Not the line read when it was found (its receipt's): an invalid entry named line 42 for line 41.
        expect(report.failure?.line, `seq ${seq} offset ${offset}: ${report.failure?.message}`).toBe(index + 1);
      }
    }
  });

  it("deleting an entry (with or without its receipt) names its seq, and the line of the entry found in its place", () => {
    const withReceipt = lines.filter((_, i) => i !== entries[6] && i !== entries[6]! + 1);
    expect(verify(joinLines(withReceipt), exported).failure).toMatchObject({ seq: 6, line: entries[6]! + 1 });
    const alone = lines.filter((_, i) => i !== entries[6]);
    expect(verify(joinLines(alone), exported).failure).toMatchObject({ seq: 6 });
  });

  it("deleting entry 0 names seq 0 (its receipt, a genuine one of this log, follows no entry)", () => {
    // Before entry 0 the log has no id, and the receipt was taken for another log's: file damage.
    const withoutGenesis = lines.filter((_, i) => i !== entries[0]);
    expect(verify(joinLines(withoutGenesis), exported).failure).toMatchObject({ seq: 0, message: "seq 0: receipt without its entry (entry missing or reordered)" });
  });

  it("duplicating an entry names the position it took", () => {
    const duplicated = [...lines.slice(0, entries[7]! + 2), lines[entries[7]!]!, lines[entries[7]! + 1]!, ...lines.slice(entries[7]! + 2)];
    const failure = verify(joinLines(duplicated), exported).failure;
    expect(failure).toMatchObject({ seq: 8 });
    expect(failure!.message).toMatch(/duplicate/);
  });

  it("swapping two entries names the first", () => {
    const [a, b] = [entries[10]!, entries[11]!];
    const swapped = lines.map((l) => l);
    [swapped[a], swapped[a + 1], swapped[b], swapped[b + 1]] = [lines[b]!, lines[b + 1]!, lines[a]!, lines[a + 1]!];
    expect(verify(joinLines(swapped), exported).failure).toMatchObject({ seq: 10 });
  });

  it("truncating the export names the first missing seq", () => {
    expect(verify(joinLines(lines.slice(0, entries[12]!)), exported).failure).toMatchObject({ seq: 12 });
    expect(verify(joinLines(lines.slice(0, entries[2]!)), exported).failure).toMatchObject({ seq: 2 });
  });

  it("a checkpoint found after fewer entries than it covers names a range that reaches the missing entry", () => {
    // Entry 8, the last before the checkpoint of size 9, deleted without a receipt to tell: [5, 8) left it out.
    const stripped = lines.filter((line) => !line.toString().startsWith('{"receipt":'));
    const index = stripped.findIndex((line) => line.toString().includes('"seq":8,'));
    const failure = verify(joinLines(stripped.filter((_, i) => i !== index)), exported).failure;
    expect(failure).toMatchObject({ range: [5, 9], message: "checkpoint of size 9 found after 8 entries (entries missing, added or moved)" });
  });

  it("a checkpoint of more entries than the export holds allows another history or log, as a root mismatch does", async () => {
    // Same key and origin, a longer history: the export is not a truncation of it.
    const other = await openTestLog({ signer: source.signer });
    await buildLog(other, (n) => ({ n, other: true }), []);
    await other.driver.transaction((tx) => other.log.appendMany(tx, Array.from({ length: 6 }, (_, n) => ({ kind: "gate.decision", source: "gate", body: { n } }))));
    const bigger = await other.log.checkpoint();
    expect(bigger.size).toBe(entry_count + 6);
    expect(verify(exported.bytes, exported, { checkpoint: bigger.note }).failure).toMatchObject({
      seq: entry_count,
      message: `the export ends after ${entry_count} entries but the checkpoint covers ${entry_count + 6}: truncated from seq ${entry_count}, or the checkpoint is of another history or log`,
    });
  });

  it("with receipts stripped, an altered entry is narrowed to its checkpoint range", () => {
    const stripped = lines.filter((line) => !line.toString().startsWith('{"receipt":'));
    expect(verify(joinLines(stripped), exported).ok).toBe(true);
    const index = stripped.findIndex((line) => line.toString().includes('"n":7,'));
    stripped[index] = Buffer.from(stripped[index]!.toString().replace('"n":7,', '"n":8,'));
    const failure = verify(joinLines(stripped), exported).failure;
    expect(failure).toMatchObject({ range: [5, 9] });
  });
});

describe("tampering with receipts and checkpoints", () => {
  it("a forged receipt signature is caught when every receipt is checked", () => {
    const index = entries[4]! + 1;
    const tampered = lines.map((l) => l);
    tampered[index] = Buffer.from(lines[index]!.toString().replace(/"signature":"(.)/, (_, c: string) => `"signature":"${c === "A" ? "B" : "A"}`));
    expect(verify(joinLines(tampered), exported).ok).toBe(true);
    expect(verify(joinLines(tampered), exported, { allReceipts: true }).failure).toMatchObject({ seq: 4 });
  });

  it("a receipt whose kind or time alone was altered fails as an altered receipt line, laid out as exported or re-laid-out", () => {
    const index = entries[4]! + 1;
    const receipt = (JSON.parse(lines[index]!.toString()) as { receipt: Record<string, unknown> }).receipt;
    const at = String(receipt.at);
    const altered = [
      { field: "kind", line: lines[index]!.toString().replace('"kind":"gate.decision"', '"kind":"gate.settlement"'), says: `kind "gate.settlement" at "${at}"` },
      { field: "at", line: lines[index]!.toString().replace(`"at":"${at}"`, '"at":"2020-01-01T00:00:00.000Z"'), says: 'kind "gate.decision" at "2020-01-01T00:00:00.000Z"' },
    ];
    for (const { field, line, says } of altered) {
      const relaid = JSON.stringify({ receipt: { ...(JSON.parse(line) as { receipt: object }).receipt, padding: undefined } }).replace('{"receipt":{"at"', '{"receipt":{ "at"');
      for (const form of [line, relaid]) {
        const tampered = lines.map((l) => l);
        tampered[index] = Buffer.from(form);
        expect(verify(joinLines(tampered), exported).failure, field).toEqual({
          file: true,
          line: index + 1,
          message: `line ${index + 1}: the receipt of seq 4 says ${says}, but its entry holds kind "gate.decision" received_at "${at}": the receipt line was altered`,
        });
      }
    }
  });

  it("a receipt line that repeats kind or at after its genuine fields fails: JSON.parse keeps the last copy, and so does verify", () => {
    const index = entries[3]! + 1;
    const genuine = lines[index]!.toString();
    const at = String((JSON.parse(genuine) as { receipt: { at: string } }).receipt.at);
    for (const repeated of ['"kind":"gate.settlement"', '"at":"2020-01-01T00:00:00.000Z"']) {
      const tampered = lines.map((l) => l);
      tampered[index] = Buffer.from(`${genuine.slice(0, -2)},${repeated}}}`);
      const says = repeated.startsWith('"kind"') ? `kind "gate.settlement" at "${at}"` : 'kind "gate.decision" at "2020-01-01T00:00:00.000Z"';
      expect(verify(joinLines(tampered), exported).failure, repeated).toEqual({
        file: true,
        line: index + 1,
        message: `line ${index + 1}: the receipt of seq 3 says ${says}, but its entry holds kind "gate.decision" received_at "${at}": the receipt line was altered`,
      });
    }
  });

  it("an export whose header's tree_size is not the number of entries it holds fails, once every entry checked out", () => {
    const header = lines[0]!.toString();
    const tampered = [Buffer.from(header.replace(`"tree_size":${entry_count}`, '"tree_size":99')), ...lines.slice(1)];
    expect(verify(joinLines(tampered), exported).failure).toEqual({ file: true, line: 1, message: `line 1: the header says tree_size 99, but the export holds ${entry_count} entries` });
    // The last entry cut off with its receipt and checkpoints, checked against a checkpoint the cut file still covers.
    const cut = lines.slice(0, entries.at(-1));
    const earlier = cut.filter((line) => line.toString().startsWith('{"checkpoint":')).at(-1)!;
    const report = verify(joinLines(cut), { ...exported, checkpoint: (JSON.parse(earlier.toString()) as { checkpoint: string }).checkpoint });
    expect(report.failure).toEqual({ file: true, line: 1, message: `line 1: the header says tree_size ${entry_count}, but the export holds ${entry_count - 1} entries` });
  });

  it("a receipt whose leaf hash was altered names its seq; one merely re-laid-out still verifies", () => {
    const index = entries[3]! + 1;
    const tampered = lines.map((l) => l);
    tampered[index] = Buffer.from(lines[index]!.toString().replace(/"leaf_hash":"(.)/, (_, c: string) => `"leaf_hash":"${c === "0" ? "1" : "0"}`));
    const failure = verify(joinLines(tampered), exported).failure;
    expect(failure).toMatchObject({ seq: 3 });
    expect(failure!.message).toMatch(/receipt does not verify/);
    const relaid = lines.map((l) => l);
    const parsed = JSON.parse(lines[index]!.toString()) as { receipt: Record<string, unknown> };
    relaid[index] = Buffer.from(JSON.stringify({ receipt: { signature: parsed.receipt.signature, ...parsed.receipt } }));
    expect(verify(joinLines(relaid), exported).ok).toBe(true);
  });

  it("a receipt whose signed fields have the wrong JSON types names its seq instead of throwing", () => {
    const index = entries[3]! + 1;
    const parsed = JSON.parse(lines[index]!.toString()) as { receipt: Record<string, unknown> };
    for (const [field, value] of [["signature", 5], ["kind", null], ["at", ["x"]]] as const) {
      const tampered = lines.map((l) => l);
      // A wrong leaf hash sends the receipt down the path that checks its signature.
      tampered[index] = Buffer.from(JSON.stringify({ receipt: { ...parsed.receipt, leaf_hash: "0".repeat(64), [field]: value } }));
      const report = verify(joinLines(tampered), exported);
      expect(report.failure, field).toMatchObject({ seq: 3, message: expect.stringMatching(/malformed receipt/) });
    }
  });

  it("an altered intermediate checkpoint is named by its line, not as bad entries (they are intact)", () => {
    const index = lines.findIndex((line) => line.toString().startsWith('{"checkpoint":"test.bursar/log\\n9\\n'));
    const tampered = lines.map((l) => l);
    tampered[index] = Buffer.from(lines[index]!.toString().replace("\\n9\\n", "\\n8\\n"));
    const failure = verify(joinLines(tampered), exported).failure;
    expect(failure).toMatchObject({ file: true, line: index + 1 });
    expect(failure?.message).toMatch(new RegExp(`^checkpoint at line ${index + 1}: `));
    expect(failure?.range).toBeUndefined();
  });

  it("a checkpoint or receipt line cut short, or a stray receipt line, is damage to the file, whatever seq the line claims", () => {
    const index = lines.findIndex((line) => line.toString().startsWith('{"checkpoint":"test.bursar/log\\n9\\n'));
    const receipt = lines.findIndex((line, at) => at > index && line.toString().startsWith('{"receipt":'));
    const cut = (at: number) => lines.map((line, i) => (i === at ? line.subarray(0, 60) : line));
    const inserted = (text: string) => [...lines.slice(0, index + 1), Buffer.from(text), ...lines.slice(index + 1)];
    // Before: the checkpoint's range [5, 9), the entry before the receipt, and seq -7.5 / 1e+300 / 0 were named bad.
    for (const [damaged, line] of [
      [cut(index), index + 1],
      [cut(receipt), receipt + 1],
      [inserted('{"receipt":{"seq":-7.5}}'), index + 2],
      [inserted('{"receipt":{"seq":1e300}}'), index + 2],
      [inserted('{"receipt":{"seq":0,"leaf_hash":"' + "0".repeat(64) + '","kind":"gate.decision","at":"2026-01-01T00:00:00.000Z","key_id":"00000000","signature":"AAAA"}}'), index + 2],
    ] as const) {
      const failure = verify(joinLines(damaged), exported).failure;
      expect(failure, String(line)).toMatchObject({ file: true, line });
      expect(failure?.seq, String(line)).toBeUndefined();
      expect(failure?.range, String(line)).toBeUndefined();
    }
  });

  it("a line that is neither an entry nor a meta line is damage to the file, named by its line, whatever follows it", () => {
    // Before: `seq 14: line 34 is neither…`, the first bad entry one past the log's last.
    const at = (index: number, text: string) => [...lines.slice(0, index), Buffer.from(text), ...lines.slice(index)];
    for (const [damaged, line] of [
      [at(lines.length, "garbage"), lines.length + 1],
      [at(entries[4]!, '{"note":"hi"}'), entries[4]! + 1],
      [at(entries[4]! + 1, '{"note":"hi"}'), entries[4]! + 2],
      [at(entries[10]!, "garbage"), entries[10]! + 1],
    ] as const) {
      expect(verify(joinLines(damaged), exported).failure, String(line)).toEqual({ file: true, line, message: `line ${line} is neither an entry nor a known meta line` });
    }
    // In an entry's place, followed by that entry's genuine receipt, it names the entry.
    const replaced = lines.map((line, i) => (i === entries[4] ? Buffer.from('{"note":"hi"}') : line));
    expect(verify(joinLines(replaced), exported).failure).toEqual({
      seq: 4,
      line: entries[4]! + 1,
      message: `seq 4: line ${entries[4]! + 1} is neither an entry nor a known meta line, and the receipt of entry 4 follows it (the entry altered or missing)`,
    });
  });

  it("a checkpoint signed by another key is refused", async () => {
    const stranger = await openTestLog({ signer: newSigner(test_origin) });
    const report = verify(exported.bytes, exported, { checkpoint: (await stranger.log.checkpoint()).note });
    expect(report.ok).toBe(false);
    expect(report.failure!.message).toMatch(/not signed/);
    expect(verify(exported.bytes, exported, { key: stranger.log.verifierKey }).ok).toBe(false);
  });

  it("an older checkpoint that is a prefix verifies; one from another history names the range", async () => {
    const forkSource = await openTestLog();
    const t = await openTestLog({ signer: forkSource.signer });
    await buildLog(t, (n) => ({ n, tool: "create_order", args: { amount: 100 * n, currency: "INR", notes: { item: `chai ₹${n}` } } }), [5, 9]);
    const own = await exportAll(t);
    const ownLines = splitLines(own.bytes);
    const ownFive = JSON.parse(ownLines.find((line) => line.toString().includes("\\n5\\n"))!.toString()) as { checkpoint: string };
    expect(verify(own.bytes, own, { checkpoint: ownFive.checkpoint }).ok).toBe(true);

    // Same key, same origin, a different history: as if the operator rewrote the log.
    const fork = await openTestLog({ signer: forkSource.signer });
    await buildLog(fork, (n) => ({ n, tool: "create_order", args: { amount: 999 } }), [5]);
    const forkFive = (await fork.driver.read((tx) => tx.get<{ note: string }>("SELECT note FROM log_checkpoints WHERE tree_size = 5")))!;
    const report = verify(own.bytes, own, { checkpoint: forkFive.note });
    expect(report.ok).toBe(false);
    // The export's own checkpoint at size 1 agrees with its entries, which says nothing of where
    // the given checkpoint's history parts from it: the whole range is named.
    expect(report.failure).toMatchObject({ range: [0, 5] });
    expect(report.failure!.message).toMatch(/^root mismatch: entries 0\.\.4 do not make the root of the given checkpoint of size 5 \(the export's own signed checkpoints, up to size 1, agree with its entries; the entries after them were altered, or the given checkpoint is of another history/);
  });
});
