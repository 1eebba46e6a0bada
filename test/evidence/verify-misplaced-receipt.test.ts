// A genuine receipt moved or copied onto another entry (the entries themselves untouched) is
// named by verify as another entry's receipt, never as an altered entry; an entry altered under
// its own receipt is still named as altered.

import { generateKeyPairSync } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { createLogSigner } from "../../src/evidence/keys.js";
import { leafHash } from "../../src/evidence/merkle.js";
import { signReceiptFields } from "../../src/evidence/receipt.js";
import {
  checkpointLineSize as checkpointSize,
  exportAt,
  isCheckpointLine as isCheckpoint,
  isEntryLine as isEntry,
  openTestLog,
  steppingClock,
  test_origin,
  verifyLines,
  type Exported,
  type TestLog,
} from "./support.js";

const entry_count = 12;
/** The auditor's older checkpoint, for the tests of entries past every signed root. */
const older_size = 5;

function indexOfEntry(lines: string[], seq: number): number {
  let seen = -1;
  return lines.findIndex((line) => isEntry(line) && ++seen === seq);
}

/** The receipt line the exporter wrote after entry `seq`. */
function receiptOf(lines: string[], seq: number): string {
  const line = lines[indexOfEntry(lines, seq) + 1]!;
  expect(line.startsWith('{"receipt":')).toBe(true);
  return line;
}

const leafOf = (receiptLine: string) => (JSON.parse(receiptLine) as { receipt: { leaf_hash: string } }).receipt.leaf_hash;

/** Entry `onto`'s receipt line replaced by entry `from`'s; moved: `from` then has none. */
function misplace(lines: string[], from: number, onto: number, how: "copied" | "moved"): string[] {
  const source = indexOfEntry(lines, from) + 1;
  const target = indexOfEntry(lines, onto) + 1;
  const copied = lines.map((line, i) => (i === target ? lines[source]! : line));
  return how === "copied" ? copied : copied.filter((_, i) => i !== source);
}

let t: TestLog;
let reset: TestLog;
let exported: Exported;

beforeAll(async () => {
  const { privateKey } = generateKeyPairSync("ed25519");
  t = await openTestLog({ signer: createLogSigner(privateKey, test_origin) });
  for (let n = 1; n < entry_count; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, tool: "create_order", amount: 100 * n } }));
    if (n + 1 === older_size || n + 1 === 9) await t.log.checkpoint();
  }
  await t.log.checkpoint();
  exported = await exportAt(t, entry_count);
  // The same store reset a day later: same key and origin, another log id.
  const clock = steppingClock(Date.parse("2026-01-02T00:00:00.000Z"));
  reset = await openTestLog({ signer: createLogSigner(privateKey, test_origin), clock });
  for (let n = 1; n < 6; n++) {
    await reset.driver.transaction((tx) => reset.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, tool: "create_order", amount: 7 } }));
  }
});

describe("a receipt moved or copied onto another entry", () => {
  it("verifies untouched, and is named as the other entry's receipt on the line it sits on, not as an altered entry", () => {
    expect(verifyLines(exported, exported.lines).ok).toBe(true);
    for (const [from, onto] of [[3, 7], [10, 6], [0, 2], [2, 0], [10, 11]] as const) {
      for (const how of ["copied", "moved"] as const) {
        const lines = misplace(exported.lines, from, onto, how);
        const receiptLine = indexOfEntry(lines, onto) + 2;
        for (const allReceipts of [false, true]) {
          const report = verifyLines(exported, lines, { allReceipts });
          const label = `receipt of ${from} ${how} onto ${onto}, allReceipts ${allReceipts}`;
          expect(report.ok, label).toBe(false);
          expect(report.failure, label).toEqual({
            seq: onto,
            line: receiptLine,
            message: `seq ${onto}: carries the receipt of another entry (seq ${from}, leaf hash ${leafOf(receiptOf(exported.lines, from))}): a receipt moved or copied from that entry, not a sign that this entry was altered`,
          });
        }
      }
    }
  });

  it("once its line is deleted, leaves the entry to the signed checkpoint: intact it verifies, altered its range fails", () => {
    const alter = (lines: string[]) => lines.map((line, i) => (i === indexOfEntry(lines, 7) ? line.replace('"amount":700', '"amount":701') : line));
    const lines = misplace(exported.lines, 3, 7, "moved");
    const deleted = lines.filter((_, i) => i !== indexOfEntry(lines, 7) + 1);
    expect(verifyLines(exported, deleted).ok).toBe(true);
    // Altered as well, the entry is still named by the receipt it carries: that says nothing of its content.
    expect(verifyLines(exported, alter(lines)).failure).toMatchObject({ seq: 7, message: expect.stringMatching(/^seq 7: carries the receipt of another entry/) });
    expect(verifyLines(exported, alter(deleted)).failure).toMatchObject({ range: [5, 9] });
  });

  it("past every signed checkpoint, is named the same way", () => {
    const tail = exported.lines.filter((line) => !isCheckpoint(line) || checkpointSize(line) <= older_size);
    const older = (JSON.parse(tail.filter(isCheckpoint).at(-1)!) as { checkpoint: string }).checkpoint;
    expect(checkpointSize(tail.filter(isCheckpoint).at(-1)!)).toBe(older_size);
    expect(verifyLines(exported, tail, { checkpoint: older }).ok).toBe(true);
    for (const [from, onto] of [[8, 10], [3, 7]] as const) {
      const report = verifyLines(exported, misplace(tail, from, onto, "moved"), { checkpoint: older });
      expect(report.failure, `${from} onto ${onto}`).toMatchObject({ seq: onto, message: expect.stringMatching(new RegExp(`^seq ${onto}: carries the receipt of another entry \\(seq ${from}, `)) });
    }
  });

  it("is named as of another log when it is a reset store's receipt (same key and origin)", async () => {
    await reset.log.checkpoint();
    const other = await exportAt(reset, await reset.log.treeSize());
    const foreign = receiptOf(other.lines, 3);
    const lines = exported.lines.map((line, i) => (i === indexOfEntry(exported.lines, 6) + 1 ? foreign : line));
    expect(verifyLines(exported, lines).failure).toMatchObject({
      seq: 6,
      message: `seq 6: its receipt is of another log (log ${JSON.stringify(reset.log.logId)}; this export's entry 0 has leaf hash ${t.log.logId})`,
    });
  });

  it("is named as of another log at the entry's own seq too, not as an altered entry", async () => {
    await reset.log.checkpoint();
    const other = await exportAt(reset, await reset.log.treeSize());
    const lines = exported.lines.map((line, i) => (i === indexOfEntry(exported.lines, 5) + 1 ? receiptOf(other.lines, 5) : line));
    for (const allReceipts of [false, true]) {
      expect(verifyLines(exported, lines, { allReceipts }).failure, `allReceipts ${allReceipts}`).toMatchObject({
        seq: 5,
        message: `seq 5: its receipt is of another log (log ${JSON.stringify(reset.log.logId)}; this export's entry 0 has leaf hash ${t.log.logId})`,
      });
    }
  });

  it("standing where no entry precedes it, is named as a receipt away from its entry, not a missing entry", () => {
    for (const how of ["copied", "moved"] as const) {
      const source = indexOfEntry(exported.lines, 3) + 1;
      const after = indexOfEntry(exported.lines, 7) + 1;
      const inserted = [...exported.lines.slice(0, after + 1), exported.lines[source]!, ...exported.lines.slice(after + 1)];
      const lines = how === "copied" ? inserted : inserted.filter((_, i) => i !== source);
      const report = verifyLines(exported, lines);
      expect(report.failure, how).toEqual({
        seq: 3,
        line: lines.lastIndexOf(exported.lines[source]!) + 1,
        message: "seq 3: its receipt stands where no entry precedes it, after entry 7 (entry 3 is earlier in the export): a receipt moved or copied away from its entry",
      });
    }
    // A receipt whose entry never came is still a missing entry.
    const entry8 = indexOfEntry(exported.lines, 8);
    const withoutEntry = exported.lines.filter((_, i) => i !== entry8);
    expect(verifyLines(exported, withoutEntry).failure).toMatchObject({ seq: 8, message: "seq 8: receipt without its entry (entry missing or reordered)" });
  });
});

describe("a receipt that disagrees with its entry at the entry's own seq", () => {
  it("still names an entry altered under its own receipt as altered, by the entry's line", () => {
    const index = indexOfEntry(exported.lines, 7);
    const lines = exported.lines.map((line, i) => (i === index ? line.replace('"amount":700', '"amount":701') : line));
    expect(lines[index]).toContain('"amount":701');
    for (const allReceipts of [false, true]) {
      expect(verifyLines(exported, lines, { allReceipts }).failure).toEqual({ seq: 7, line: index + 1, message: "seq 7: entry altered: its leaf hash differs from its signed receipt" });
    }
  });

  it("names the receipt that does not verify within the range its signed root disagrees with, when an entry was altered along with its receipt's leaf hash", () => {
    const index = indexOfEntry(exported.lines, 7);
    const altered = exported.lines[index]!.replace('"amount":700', '"amount":701');
    const forged = receiptOf(exported.lines, 7).replace(leafOf(receiptOf(exported.lines, 7)), leafHash(Buffer.from(altered, "utf8")).toString("hex"));
    const lines = exported.lines.map((line, i) => (i === index ? altered : i === index + 1 ? forged : line));
    expect(verifyLines(exported, lines).failure).toEqual({
      range: [5, 9],
      line: index + 2,
      message: expect.stringMatching(
        /^entries 5\.\.8 do not match the signed checkpoint of size 9; within them, seq 7: receipt does not verify \(.*\): that entry, or its receipt, was altered$/,
      ),
    });
    // A decoy: entry 7 altered with its receipt gone, entry 6's receipt forged. Entry 6 is named
    // only as a suspect, beside the range; it is not called the first bad entry.
    const decoyed = exported.lines
      .map((line, i) => (i === index ? altered : i === indexOfEntry(exported.lines, 6) + 1 ? line.replace(/"signature":"(.)/, (_, c: string) => `"signature":"${c === "A" ? "B" : "A"}`) : line))
      .filter((_, i) => i !== index + 1);
    const decoy = verifyLines(exported, decoyed).failure!;
    expect(decoy.seq).toBeUndefined();
    expect(decoy).toMatchObject({ range: [5, 9], message: expect.stringMatching(/within them, seq 6: receipt does not verify/) });
  });

  it("names a receipt the key signed for this entry's leaf hash at another seq by the seq it claims", () => {
    const index = indexOfEntry(exported.lines, 7);
    const entry = JSON.parse(exported.lines[index]!) as { kind: string; received_at: string };
    const leaf_hash = leafHash(Buffer.from(exported.lines[index]!, "utf8")).toString("hex");
    const receipt = signReceiptFields(t.signer, { seq: 3, leaf_hash, kind: entry.kind, at: entry.received_at }, { origin: t.log.origin, log: t.log.logId });
    const lines = exported.lines.map((line, i) => (i === index + 1 ? JSON.stringify({ receipt }) : line));
    expect(verifyLines(exported, lines).failure).toEqual({ seq: 7, line: index + 2, message: "seq 7: its receipt is signed for this entry's leaf hash at seq 3, but the entry holds seq 7" });
  });
});
