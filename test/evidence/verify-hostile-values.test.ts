// Values an export may hold that no honest one does, where verify names them in its message:
// nested deeper than the call stack (JSON.parse takes them; JSON.stringify and template
// literals overflowed), or objects whose toString is not a function. Each used to end verify
// in a stack trace; each is a FAIL naming the line, and never a pass. From a hostile review.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as verifyCommand from "../../src/cli/commands/verify.js";
import { bufferLines, export_line_bytes_max, verifyExport, type VerifyReport } from "../../src/evidence/verify.js";
import { jsonPreview } from "../../src/json-text.js";
import { capturedIo, exportAt, isCheckpointLine, isEntryLine, isReceiptLine, openTestLog, tempDir, verifyLines, type Exported } from "./support.js";

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
    // Its signature cannot verify: the line is damaged, and the checkpoint of size 3 binds entry 1.
    expect(failed(verifyLines(exported, lines))).toMatchObject({ file: true, line: index + 1, message: expect.stringContaining("the receipt of seq 1 names another log (log an array) and does not verify") });
  });

  it("names an entry whose version is nested deeper than the call stack", () => {
    const index = exported.lines.findIndex((line, i) => isEntryLine(line) && i > 3);
    const lines = [...exported.lines.slice(0, index), `{"body":{},"v":${deep}}`, ...exported.lines.slice(index)];
    expect(failed(verifyLines(exported, lines)).message).toContain("unsupported version an array");
  });

  it("refuses, by its line, a tail receipt whose second seq is an object with a toString member", () => {
    // Past the trusted checkpoint (size 3) with the final checkpoint line gone: entries 3..5
    // rest on their receipts. JSON.parse keeps the second "seq"; a line with a repeated key is
    // never read by position, so that is the one weighed, and no seq is no receipt.
    const tail = exported.lines.filter((line) => !isCheckpointLine(line) || line.includes("\\n3\\n"));
    const last = tail.length - 1;
    expect(isReceiptLine(tail[last]!)).toBe(true);
    const lines = replaced(tail, last, tail[last]!.replace(/"\}\}$/, '","seq":{"toString":1},"zz":"a"}}'));
    const failure = failed(verifyLines(exported, lines, { checkpoint: trusted_at_3 }));
    expect(failure).toEqual({ file: true, line: last + 1, message: `line ${last + 1}: malformed receipt line` });
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

describe("verify, given text with control characters", () => {
  const dir = tempDir("bursar-verify-controls-");
  afterAll(() => dir.remove());
  // The reviewer's key: printed raw, it moved the cursor up, erased the FAIL line and wrote an OK.
  const key = "zz\u001b[1A\u001b[2K\rOK 15 entries\n  all good: seq 0";

  /** The export with an entry's line given one more member, `name`. */
  function withField(name: string): { lines: string[]; index: number } {
    const index = exported.lines.findIndex((line) => isEntryLine(line) && line.includes('"seq":3,'));
    const entry = JSON.parse(exported.lines[index]!) as Record<string, unknown>;
    return { lines: replaced(exported.lines, index, JSON.stringify({ ...entry, [name]: 1 })), index };
  }

  it("quotes an entry's unexpected field, its control characters escaped and cut at 80 characters", () => {
    const { lines, index } = withField(key);
    expect(failed(verifyLines(exported, lines))).toEqual({ seq: 3, line: index + 1, message: `seq 3: not a valid entry (unexpected field ${JSON.stringify(key)})` });
    const long = `${"\u009b".repeat(100)}x`;
    const cut = failed(verifyLines(exported, withField(long).lines)).message;
    expect(cut).toBe(`seq 3: not a valid entry (unexpected field "${"\\u009b".repeat(80)}"…)`);
  });

  it("prints no control character from the export: the FAIL line and where it failed stay two lines", async () => {
    const file = join(dir.path, "controls.jsonl");
    const cp = join(dir.path, "cp.txt");
    writeFileSync(file, withField(key).lines.map((line) => `${line}\n`).join(""));
    writeFileSync(cp, exported.checkpoint);
    const io = capturedIo();
    expect(await verifyCommand.run([file, "--checkpoint", cp, "--key", exported.key], io)).toBe(1);
    expect(io.out()).toBe("");
    expect(io.err()).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(io.err().split("\n")).toEqual([expect.stringMatching(/^FAIL seq 3: not a valid entry \(unexpected field "zz\\u001b\[1A/), "  first bad entry: seq 3", ""]);
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

  it("escapes DEL and the C1 controls too, which JSON.stringify leaves (U+009B is a terminal's CSI)", () => {
    expect(jsonPreview("a\u009b2J\u007f\u0085b\u00a0")).toBe('"a\\u009b2J\\u007f\\u0085b\u00a0"');
  });

  it("escapes the bidirectional controls and the line and paragraph separators, which would reorder or break a FAIL line on screen", () => {
    const reordering = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u2028", "\u2029"];
    for (const character of reordering) {
      const code = character.charCodeAt(0).toString(16).padStart(4, "0");
      expect(jsonPreview(`evt_${character}1`), code).toBe(`"evt_\\u${code}1"`);
    }
    // Only those: their neighbours, and text in a right-to-left script, are quoted as they are.
    expect(jsonPreview("\u200d\u2027\u202f\u2065\u206a\u05d0")).toBe('"\u200d\u2027\u202f\u2065\u206a\u05d0"');
    // A right-to-left override that would print "OK" backwards reaches the terminal escaped.
    expect(jsonPreview("x\u202eKO \u2066")).toBe('"x\\u202eKO \\u2066"');
  });
});
