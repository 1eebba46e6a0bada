// `bursar verify --delivery-receipts`: the receipts `bursar send-decisions --receipts` writes
// verify offline with only the public key, and, given an export of the log, every record they
// list is that export's entry at its seq with its leaf hash.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/keys.js";
import { note_bytes_max } from "../../src/evidence/note.js";
import { export_line_bytes_max } from "../../src/evidence/verify.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";
import { ndjson, record } from "../ingest/support.js";

let server: TestServer;
let source: { id: string; signing_key: string };
const file = (name: string) => join(server.dir, name);
const data_env = () => ({ BURSAR_DATA_DIR: server.dir });

async function send(name: string, records: number, prefix: string): Promise<void> {
  writeFileSync(file(`${name}.jsonl`), ndjson(Array.from({ length: records }, (_, i) => record(`${prefix}_${i}`))));
  const sent = await runBursar(["send-decisions", file(`${name}.jsonl`), "--url", server.url, "--source", source.id, "--receipts", file("receipts.jsonl")], {
    BURSAR_SOURCE_SIGNING_KEY: source.signing_key,
  });
  expect({ code: sent.code, stderr: sent.stderr }).toEqual({ code: 0, stderr: "" });
}

async function exportLog(name: string): Promise<void> {
  expect((await runBursar(["export", "--out", file(`${name}.jsonl`), "--checkpoint", file(`${name}.cp`)], data_env())).code).toBe(0);
}

beforeAll(async () => {
  ensureBuilt();
  server = await testServer();
  source = (await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "verify-cli" })).body;
  await send("first", 600, "evt_first");
  await exportLog("early");
  await send("second", 10, "evt_second");
  await exportLog("log");
});
afterAll(async () => server.close());

const verify = (args: string[]) => runBursar(["verify", ...args]);
const key = async () => (await runBursar(["key"], data_env())).stdout.trim();

describe("bursar verify --delivery-receipts", () => {
  it("verifies every receipt's signature with only the key, and each listed record against a verified export", async () => {
    const signed = await verify(["--delivery-receipts", file("receipts.jsonl"), "--key", await key()]);
    expect(signed.stderr).toBe("");
    expect(signed.code).toBe(0);
    expect(signed.stdout).toMatch(/^OK 3 delivery receipts listing 610 records, signed by bursar\.local\/log\+[0-9a-f]{8} for log [0-9a-f]{64} of origin bursar\.local\/log\n$/);
    const bound = await verify(["--delivery-receipts", file("receipts.jsonl"), file("log.jsonl"), "--checkpoint", file("log.cp"), "--key", await key()]);
    expect(bound.stderr).toBe("");
    expect(bound.code).toBe(0);
    expect(bound.stdout).toContain(`; every record is in ${file("log.jsonl")} at its seq with its leaf hash, and the export verifies (`);
  });

  it("takes a whole ingest answer on a line, and skips blank lines", async () => {
    const lines = readFileSync(file("receipts.jsonl"), "utf8").trim().split("\n");
    writeFileSync(file("answers.jsonl"), `\n${JSON.stringify({ written: 1, receipt: JSON.parse(lines[0]!) as unknown })}\r\n\n${lines[1]}\n`);
    const answered = await verify(["--delivery-receipts", file("answers.jsonl"), "--key", await key()]);
    expect({ code: answered.code, stdout: answered.stdout }).toMatchObject({ code: 0, stdout: expect.stringMatching(/^OK 2 delivery receipts listing 600 records/) });
  });

  it("names the line of a tampered receipt, of one signed by another key, and of one that is not a receipt, and exits 1", async () => {
    const lines = readFileSync(file("receipts.jsonl"), "utf8").trim().split("\n");
    const second = JSON.parse(lines[1]!) as { records: Array<{ seq: number }> };
    second.records[0]!.seq += 1;
    writeFileSync(file("tampered.jsonl"), `${lines[0]}\n${JSON.stringify(second)}\n`);
    const tampered = await verify(["--delivery-receipts", file("tampered.jsonl"), "--key", await key()]);
    expect({ code: tampered.code, stdout: tampered.stdout, stderr: tampered.stderr }).toEqual({
      code: 1,
      stdout: "",
      stderr: `FAIL ${file("tampered.jsonl")} line 2: delivery receipt signature does not verify as one of origin "bursar.local/log"\n`,
    });
    writeFileSync(file("other-key.pem"), generateSigningKeyPem());
    const other = (await runBursar(["key"], { BURSAR_SIGNING_KEY: file("other-key.pem") })).stdout.trim();
    const foreign = await verify(["--delivery-receipts", file("receipts.jsonl"), "--key", other]);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/line 1: receipt signed by key "[0-9a-f]+", not [0-9a-f]+\n$/);
    // Typed right, with a 64-byte signature, but holding what canonical JSON cannot write.
    const signature = Buffer.alloc(64).toString("base64");
    for (const records of ["[1e400]", '[{"event_id":"\\ud800"}]']) {
      writeFileSync(file("unwritable.jsonl"), `{"source":"s","received_at":"t","records":${records},"key_id":"${(JSON.parse(lines[0]!) as { key_id: string }).key_id}","signature":"${signature}"}\n`);
      const unwritable = await verify(["--delivery-receipts", file("unwritable.jsonl"), "--key", await key()]);
      expect({ code: unwritable.code, stderr: unwritable.stderr }).toMatchObject({ code: 1, stderr: expect.stringMatching(/^FAIL .* line 1: not a delivery receipt \(.+\)\n$/) });
    }
    writeFileSync(file("garbage.jsonl"), `${lines[0]}\n{"records": "nope"}\n`);
    const garbage = await verify(["--delivery-receipts", file("garbage.jsonl"), "--key", await key()]);
    expect({ code: garbage.code, stderr: garbage.stderr }).toEqual({
      code: 1,
      stderr: `FAIL ${file("garbage.jsonl")} line 2: not a delivery receipt (source, received_at, records, key_id and signature are required)\n`,
    });
  });

  it("refuses receipts whose records the export does not hold, naming the record", async () => {
    // The early export was taken before the third delivery: its 10 records are past its end.
    const early = await verify(["--delivery-receipts", file("receipts.jsonl"), file("early.jsonl"), "--checkpoint", file("early.cp"), "--key", await key()]);
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(new RegExp(`^FAIL ${file("receipts.jsonl")} line 3: record "evt_second_0": the export holds no entry \\d+ \\(it has \\d+\\)\\n$`));
  });

  it("stops on an input that never ends a line or never ends (/dev/zero): receipts fail at the over-long line, a checkpoint or proof past its size bound is refused", async () => {
    // Each was read whole, for ever: gigabytes within seconds.
    const receipts = await verify(["--delivery-receipts", "/dev/zero", "--key", await key()]);
    expect({ code: receipts.code, stderr: receipts.stderr }).toEqual({ code: 1, stderr: `FAIL /dev/zero line 1: longer than ${export_line_bytes_max} bytes, which no receipt line is\n` });
    for (const [args, what, bytes] of [
      [["--inclusion", "/dev/zero"], "proof", 2 * note_bytes_max],
      [["--consistency", "/dev/zero"], "proof", 2 * note_bytes_max],
      [[file("log.jsonl"), "--checkpoint", "/dev/zero"], "checkpoint", note_bytes_max],
    ] as const) {
      const refused = await verify([...args, "--key", await key()]);
      expect({ args, code: refused.code, line: refused.stderr.split("\n")[0] }).toEqual({ args, code: 2, line: `bursar verify: cannot read ${what} /dev/zero: longer than ${bytes} bytes, which no ${what} is` });
    }
  });

  it("is a usage error (exit 2) with an export but no checkpoint, with no receipt in the file, or beside --inclusion", async () => {
    const no_checkpoint = await verify(["--delivery-receipts", file("receipts.jsonl"), file("log.jsonl"), "--key", await key()]);
    expect({ code: no_checkpoint.code, stderr: no_checkpoint.stderr }).toMatchObject({ code: 2, stderr: expect.stringContaining("--checkpoint CP is required") });
    writeFileSync(file("empty.jsonl"), "\n\n");
    const empty = await verify(["--delivery-receipts", file("empty.jsonl"), "--key", await key()]);
    expect({ code: empty.code, stderr: empty.stderr }).toMatchObject({ code: 2, stderr: expect.stringContaining("holds no delivery receipt") });
    const both = await verify(["--delivery-receipts", file("receipts.jsonl"), "--inclusion", file("x.json"), "--key", await key()]);
    expect(both.code).toBe(2);
    // A checkpoint with no export to check would be ignored while OK is printed.
    const no_export = await verify(["--delivery-receipts", file("receipts.jsonl"), "--checkpoint", file("log.cp"), "--key", await key()]);
    expect({ code: no_export.code, stderr: no_export.stderr }).toMatchObject({ code: 2, stderr: expect.stringContaining("give its FILE after RECEIPTS") });
  });
});
