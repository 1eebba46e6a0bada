// Values an export may hold that no honest one does, where verify names them in its message:
// nested deeper than the call stack (JSON.parse takes them; JSON.stringify and template
// literals overflowed), or objects whose toString is not a function. Each used to end verify
// in a stack trace; each is a FAIL naming the line, and never a pass. From a hostile review.

import { beforeAll, describe, expect, it } from "vitest";
import { bufferLines, export_line_bytes_max, verifyExport, type VerifyReport } from "../../src/evidence/verify.js";
import { jsonPreview } from "../../src/json-text.js";
import { exportAt, isCheckpointLine, isEntryLine, isReceiptLine, openTestLog, verifyLines, type Exported } from "./support.js";

const depth = 200_000;
const deep = "[".repeat(depth) + "]".repeat(depth);

let exported: Exported;
let trusted_at_3: string;

beforeAll(async () => {
  const t = await openTestLog();
  for (let n = 1; n < 6; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, effect: "ALLOW", amount: 100 * n } }));
    if (n === 2) await t.log.checkpoint();
  }
  await t.log.checkpoint();
  exported = await exportAt(t, 6);
  trusted_at_3 = (await t.driver.read((tx) => tx.get<{ note: string }>("SELECT note FROM log_checkpoints WHERE tree_size = 3")))!.note;
});

/** The export with line `index` (0-based) replaced by `line`. */
const replaced = (lines: string[], index: number, line: string) => lines.map((old, i) => (i === index ? line : old));

function failed(report: VerifyReport): NonNullable<VerifyReport["failure"]> {
  expect(report.ok).toBe(false);
  return report.failure!;
}

describe("verify, given values no export holds", () => {
  it("names a header whose origin is nested deeper than the call stack", () => {
    const lines = replaced(exported.lines, 0, `{"bursar_export":{"origin":${deep},"v":1}}`);
    expect(failed(verifyLines(exported, lines))).toMatchObject({ line: 1, message: expect.stringContaining("the export is of log an array") });
  });

  it("names a receipt whose log is nested deeper than the call stack", () => {
    const index = exported.lines.findIndex((line) => isReceiptLine(line) && line.includes('"seq":1,'));
    const lines = replaced(exported.lines, index, exported.lines[index]!.replace(/"log":"[0-9a-f]{64}"/, `"log":${deep}`));
    expect(failed(verifyLines(exported, lines))).toMatchObject({ seq: 1, message: expect.stringContaining("its receipt is of another log (log an array;") });
  });

  it("names an entry whose version is nested deeper than the call stack", () => {
    const index = exported.lines.findIndex((line, i) => isEntryLine(line) && i > 3);
    const lines = [...exported.lines.slice(0, index), `{"body":{},"v":${deep}}`, ...exported.lines.slice(index)];
    expect(failed(verifyLines(exported, lines)).message).toContain("unsupported version an array");
  });

  it("names a tail receipt whose second seq is an object with a toString member", () => {
    // Past the trusted checkpoint (size 3) with the final checkpoint line gone: entries 3..5
    // rest on their receipts. The fast path reads the first "seq"; JSON.parse keeps the second.
    const tail = exported.lines.filter((line) => !isCheckpointLine(line) || line.includes("\\n3\\n"));
    const last = tail.length - 1;
    expect(isReceiptLine(tail[last]!)).toBe(true);
    const lines = replaced(tail, last, tail[last]!.replace(/"\}\}$/, '","seq":{"toString":1},"zz":"a"}}'));
    const failure = failed(verifyLines(exported, lines, { checkpoint: trusted_at_3 }));
    expect(failure).toMatchObject({ seq: 5, message: expect.stringContaining("names another entry (seq an object)") });
  });

  it("fails, by the file and the line, where checking a line throws anything else, naming the error", () => {
    // onLeaf runs inside a line's check: a throw there stands for a fault no rule names.
    const bytes = Buffer.from(exported.lines.map((line) => `${line}\n`).join(""), "utf8");
    const entry_line = exported.lines.findIndex(isEntryLine) + 1;
    const report = verifyExport(() => bufferLines(bytes), {
      checkpoint: exported.checkpoint,
      key: exported.key,
      onLeaf: () => {
        throw new TypeError("Cannot convert object to primitive value");
      },
    });
    expect(failed(report)).toEqual({ file: true, line: entry_line, message: `line ${entry_line} cannot be checked (TypeError: Cannot convert object to primitive value); no export line is made so` });
  });

  it("does not blame an entry for an over-long line that stands where a receipt does", () => {
    const index = exported.lines.findIndex((line) => isReceiptLine(line) && line.includes('"seq":2,'));
    const lines = replaced(exported.lines, index, `{"receipt":${"a".repeat(export_line_bytes_max + 10)}`);
    const failure = failed(verifyLines(exported, lines));
    expect(failure).toEqual({ file: true, line: index + 1, message: `line ${index + 1} is longer than ${export_line_bytes_max} bytes, which no export line is` });
  });
});

describe("jsonPreview", () => {
  it("quotes a string, cut long; writes numbers, booleans and null; names arrays and objects by kind", () => {
    expect([jsonPreview("ab\n"), jsonPreview("x".repeat(100)), jsonPreview(-0.5), jsonPreview(true), jsonPreview(null)]).toEqual([
      '"ab\\n"',
      `"${"x".repeat(80)}"…`,
      "-0.5",
      "true",
      "null",
    ]);
    expect([jsonPreview(JSON.parse(deep)), jsonPreview({ toString: 1 }), jsonPreview(undefined)]).toEqual(["an array", "an object", "nothing"]);
  });
});
