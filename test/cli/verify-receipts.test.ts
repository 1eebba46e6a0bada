// `bursar verify --receipts`: an entry's receipt, as an agent holds it in a gate tool's result
// (`evidence.receipt`: alone, in its `evidence` object, in the structuredContent, the whole
// CallToolResult or the JSON-RPC response), verifies offline
// with only the public key, and, given an export of the log, names that export's entry at its
// seq with its leaf hash.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

interface Evidence {
  seq: number;
  leaf_hash: string;
  receipt: Record<string, unknown>;
}

let server: TestServer;
let results: Array<{ evidence: Evidence }>;
let calls: unknown[];
const file = (name: string) => join(server.dir, name);
const data_env = () => ({ BURSAR_DATA_DIR: server.dir });
const verify = (args: string[]) => runBursar(["verify", ...args]);
const key = async () => (await runBursar(["key"], data_env())).stdout.trim();

beforeAll(async () => {
  ensureBuilt();
  server = await testServer();
  const agent = await server.agent();
  const client = await server.client(agent.token);
  results = [];
  calls = [];
  for (const amount of [1_000, 2_000, 3_000]) {
    const result = await client.callTool({ name: "create_order", arguments: { amount, currency: "INR" } });
    results.push(result.structuredContent as { evidence: Evidence });
    calls.push(result);
    if (amount === 1_000) expect((await runBursar(["export", "--out", file("early.jsonl"), "--checkpoint", file("early.cp")], data_env())).code).toBe(0);
  }
  expect((await runBursar(["export", "--out", file("log.jsonl"), "--checkpoint", file("log.cp")], data_env())).code).toBe(0);
  // One line each: the receipt alone, the evidence object, the structuredContent, the whole
  // CallToolResult and the JSON-RPC response that carried it.
  const [first, second, third] = results;
  const forms = [first!.evidence.receipt, second!.evidence, third, calls[2], { jsonrpc: "2.0", id: 7, result: calls[1] }];
  writeFileSync(file("receipts.jsonl"), `${forms.map((form) => JSON.stringify(form)).join("\n")}\n\n`);
});
afterAll(async () => server.close());

describe("bursar verify --receipts", () => {
  it("verifies each receipt's signature with only the key, and each against a verified export", async () => {
    const signed = await verify(["--receipts", file("receipts.jsonl"), "--key", await key()]);
    expect({ code: signed.code, stderr: signed.stderr }).toEqual({ code: 0, stderr: "" });
    expect(signed.stdout).toMatch(/^OK 5 entry receipts, signed by bursar\.local\/log\+[0-9a-f]{8} for log [0-9a-f]{64} of origin bursar\.local\/log\n$/);
    const bound = await verify(["--receipts", file("receipts.jsonl"), file("log.jsonl"), "--checkpoint", file("log.cp"), "--key", await key()]);
    expect({ code: bound.code, stderr: bound.stderr }).toEqual({ code: 0, stderr: "" });
    expect(bound.stdout).toContain(`; every entry it names is in ${file("log.jsonl")} at its seq with its leaf hash, and the export verifies (`);
  });

  it("names the line of a receipt altered in any signed field, and of one whose entry an earlier export does not hold, and exits 1", async () => {
    const receipt = results[1]!.evidence.receipt;
    for (const [field, value] of [["kind", "gate.settlement"], ["at", "2020-01-01T00:00:00.000Z"], ["seq", (receipt.seq as number) + 1]] as const) {
      writeFileSync(file("tampered.jsonl"), `${JSON.stringify(results[0]!.evidence.receipt)}\n${JSON.stringify({ ...receipt, [field]: value })}\n`);
      const tampered = await verify(["--receipts", file("tampered.jsonl"), "--key", await key()]);
      expect({ code: tampered.code, stdout: tampered.stdout, stderr: tampered.stderr }, field).toEqual({
        code: 1,
        stdout: "",
        stderr: `FAIL ${file("tampered.jsonl")} line 2: receipt signature does not verify as one of origin "bursar.local/log"\n`,
      });
    }
    // Genuine, but its entry is not in an export taken before it was written.
    writeFileSync(file("third.jsonl"), `${JSON.stringify(results[2]!.evidence.receipt)}\n`);
    const early = await verify(["--receipts", file("third.jsonl"), file("early.jsonl"), "--checkpoint", file("early.cp"), "--key", await key()]);
    const entries = readFileSync(file("early.jsonl"), "utf8").split("\n").filter((line) => line.startsWith('{"body":')).length;
    expect({ code: early.code, stderr: early.stderr }).toEqual({
      code: 1,
      stderr: `FAIL ${file("third.jsonl")} line 1: the export holds no entry ${results[2]!.evidence.seq} (it has ${entries})\n`,
    });
  });

  it("refuses a delivery receipt under --receipts, an entry receipt under --delivery-receipts, and a line that is neither", async () => {
    writeFileSync(file("entry.jsonl"), `${JSON.stringify(results[0]!.evidence.receipt)}\n`);
    const asDelivery = await verify(["--delivery-receipts", file("entry.jsonl"), "--key", await key()]);
    expect({ code: asDelivery.code, stderr: asDelivery.stderr }).toEqual({ code: 1, stderr: `FAIL ${file("entry.jsonl")} line 1: an entry's receipt, not a delivery receipt: check it with --receipts\n` });
    writeFileSync(file("delivery.jsonl"), `${JSON.stringify({ source: "src_x", received_at: "2026-01-01T00:00:00Z", records: [], key_id: "00000000", signature: "x" })}\n`);
    const asEntry = await verify(["--receipts", file("delivery.jsonl"), "--key", await key()]);
    expect({ code: asEntry.code, stderr: asEntry.stderr }).toEqual({ code: 1, stderr: `FAIL ${file("delivery.jsonl")} line 1: a delivery receipt, not an entry's: check it with --delivery-receipts\n` });
    writeFileSync(file("garbage.jsonl"), `{"seq":1}\n`);
    const garbage = await verify(["--receipts", file("garbage.jsonl"), "--key", await key()]);
    expect({ code: garbage.code, stderr: garbage.stderr }).toEqual({
      code: 1,
      stderr: `FAIL ${file("garbage.jsonl")} line 1: not an entry receipt (seq, leaf_hash, kind, at, key_id and signature are required)\n`,
    });
    const both = await verify(["--receipts", file("entry.jsonl"), "--delivery-receipts", file("entry.jsonl"), "--key", await key()]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--delivery-receipts takes at most one export FILE, and no --inclusion, --consistency, their options or the other receipts option");
  });
});
