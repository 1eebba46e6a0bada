// A path the user chose that cannot be used (a data directory under a regular file, a
// directory given as a file) is one line naming it and exit 2, as `bursar serve` reports it,
// never a stack trace and exit 1.

import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogSigner } from "../../src/evidence/keys.js";
import { formatCheckpoint, signNote } from "../../src/evidence/note.js";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";

const dir = builtSuiteDir("bursar-path-errors-");

/** A data directory path under a regular file: every mkdir or open below it fails with ENOTDIR. */
function underRegularFile(): string {
  const file = join(dir(), "a-regular-file");
  writeFileSync(file, "");
  return join(file, "data");
}

function expectOneLine(result: { code: number | null; stdout: string; stderr: string }, line: RegExp): void {
  expect(result.stderr).not.toMatch(/\n\s+at /);
  expect(result.stderr.split("\n")).toHaveLength(2); // one line and its newline
  expect(result.stderr).toMatch(line);
  expect(result.stdout).toBe("");
  expect(result.code).toBe(2);
}

describe("unusable paths", () => {
  it.each([["admin rotate"], ["key"]])("bursar %s: BURSAR_DATA_DIR under a regular file is one line naming it, exit 2", async (command_line) => {
    const data_dir = underRegularFile();
    const args = command_line.split(" ");
    const command = args[0]!;
    const result = await runBursar(args, { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "", BURSAR_ADMIN_TOKEN: "", BURSAR_SIGNING_KEY: "" });
    expectOneLine(result, new RegExp(`^bursar ${command}: BURSAR_DATA_DIR=${data_dir}: cannot use it \\(ENOTDIR: not a directory`));
  });

  it("bursar serve reports the same data directory in the same words", async () => {
    const data_dir = underRegularFile();
    const result = await runBursar(["serve"], { BURSAR_DATA_DIR: data_dir, BURSAR_DB: "", BURSAR_ADMIN_TOKEN: "", BURSAR_PORT: "0" });
    expectOneLine(result, new RegExp(`^bursar serve: BURSAR_DATA_DIR=${data_dir}: cannot use it \\(ENOTDIR: not a directory`));
  });

  it("bursar verify DIR: a directory given as the export is one line naming it, exit 2", async () => {
    const export_dir = join(dir(), "an-export-directory");
    mkdirSync(export_dir);
    // A valid signed checkpoint, so verify gets as far as reading the export.
    const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, "bursar.local/log");
    const checkpoint = join(dir(), "checkpoint.txt");
    writeFileSync(checkpoint, signNote(formatCheckpoint({ origin: signer.name, size: 0, rootHash: Buffer.alloc(32) }), signer));
    const result = await runBursar(["verify", export_dir, "--checkpoint", checkpoint, "--key", signer.verifierKey]);
    expectOneLine(result, new RegExp(`^bursar verify: export ${export_dir}: cannot use it \\(EISDIR: illegal operation on a directory`));
  });
});
