// Checkpoints are tied to the log's origin: two logs that share one signing key (staging and
// prod) sign checkpoints that differ only in their signed origin line, since a signature line's
// key name and id are not signed. verify and the proof checks hold every checkpoint to the
// expected origin: --origin, else the verifier key's name.

import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as verifyCommand from "../../src/cli/commands/verify.js";
import { exportLog } from "../../src/evidence/export.js";
import { createLogSigner, type LogSigner } from "../../src/evidence/keys.js";
import { originProblem, parseVerifierKey } from "../../src/evidence/note.js";
import { checkConsistencyDocument, checkInclusionDocument } from "../../src/evidence/proof.js";
import { bufferLines, verifyExportLines, type VerifyOptions } from "../../src/evidence/verify.js";
import { capturedIo, openTestLog, tempDir, type TestLog } from "./support.js";

const staging_origin = "staging.example/log";
const prod_origin = "prod.example/log";

/** Rewrites every signature line of `from` into one that names `to` (same signature bytes). */
function relabel(note: string, from: LogSigner, to: LogSigner): string {
  return note.replace(new RegExp(`\u2014 ${from.name.replace(/[./]/g, "\\$&")} ([A-Za-z0-9+/=]+)\n`, "g"), (_line, base64: string) => {
    const bytes = Buffer.from(base64, "base64");
    bytes.writeUInt32BE(to.keyId, 0);
    return `\u2014 ${to.name} ${bytes.toString("base64")}\n`;
  });
}

interface Staging {
  t: TestLog;
  staging: LogSigner;
  prod: LogSigner;
  /** The staging export with every checkpoint and receipt relabelled to the prod key. */
  relabelled: Buffer;
  relabelledCheckpoint: string;
  honest: Buffer;
  checkpoint: string;
}

let s: Staging;

beforeAll(async () => {
  const { privateKey } = generateKeyPairSync("ed25519");
  const staging = createLogSigner(privateKey, staging_origin);
  const prod = createLogSigner(privateKey, prod_origin);
  const t = await openTestLog({ signer: staging, origin: staging_origin });
  for (let n = 0; n < 6; n++) {
    await t.driver.transaction((tx) => t.log.append(tx, { kind: "gate.decision", source: "gate", body: { n, effect: "ALLOW" } }));
    if (n === 2) await t.log.checkpoint();
  }
  const final = await t.log.checkpoint();
  const chunks: string[] = [];
  await exportLog(t.driver, { size: final.size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
  const honest = chunks.join("");
  const relabelled = honest
    .split("\n")
    .map((line) => {
      if (line.startsWith('{"checkpoint":')) return JSON.stringify({ checkpoint: relabel((JSON.parse(line) as { checkpoint: string }).checkpoint, staging, prod) });
      if (line.startsWith('{"receipt":')) return line.replace(`"key_id":"${staging.keyIdHex}"`, `"key_id":"${prod.keyIdHex}"`);
      return line;
    })
    .join("\n");
  s = {
    t,
    staging,
    prod,
    relabelled: Buffer.from(relabelled),
    relabelledCheckpoint: relabel(final.note, staging, prod),
    honest: Buffer.from(honest),
    checkpoint: final.note,
  };
});

function verify(bytes: Buffer, options: VerifyOptions) {
  return verifyExportLines(bufferLines(bytes), options);
}

describe("an export's checkpoints", () => {
  it("verify under their own log's key and report its origin", () => {
    const report = verify(s.honest, { checkpoint: s.checkpoint, key: s.staging.verifierKey });
    expect(report.failure).toBeUndefined();
    expect(report.origin).toBe(staging_origin);
  });

  it("of another log that shares the key do not pass for this log, even relabelled to its key", () => {
    // The relabelled signature lines do verify under the prod key: only the origin differs.
    const report = verify(s.relabelled, { checkpoint: s.relabelledCheckpoint, key: s.prod.verifierKey });
    expect(report.ok).toBe(false);
    expect(report.failure!.message).toMatch(/for origin "staging\.example\/log", not "prod\.example\/log"/);
  });

  it("are held to --origin when given, instead of the key's name", () => {
    expect(verify(s.relabelled, { checkpoint: s.relabelledCheckpoint, key: s.prod.verifierKey, origin: staging_origin }).failure).toBeUndefined();
    const report = verify(s.honest, { checkpoint: s.checkpoint, key: s.staging.verifierKey, origin: prod_origin });
    expect(report.ok).toBe(false);
    expect(report.failure!.message).toMatch(/not "prod\.example\/log" \(--origin\)/);
  });

  it("verify for a log whose key is named otherwise once --origin names its origin", async () => {
    const signer = createLogSigner(generateKeyPairSync("ed25519").privateKey, "log-key");
    const t = await openTestLog({ signer, origin: "example.com/log" });
    const final = await t.log.checkpoint();
    const chunks: string[] = [];
    await exportLog(t.driver, { size: final.size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
    const bytes = Buffer.from(chunks.join(""));
    expect(verify(bytes, { checkpoint: final.note, key: signer.verifierKey }).failure!.message).toMatch(/pass --origin/);
    expect(verify(bytes, { checkpoint: final.note, key: signer.verifierKey, origin: "example.com/log" }).ok).toBe(true);
  });
});

describe("proofs", () => {
  it("anchored on a checkpoint of another log that shares the key are refused", async () => {
    const prod = parseVerifierKey(s.prod.verifierKey);
    const size = await s.t.log.treeSize();
    const inclusion = await s.t.log.inclusionProof(2, size);
    const consistency = await s.t.log.consistencyProof(4, size);
    const relabelledInclusion = { ...inclusion, checkpoint: relabel(inclusion.checkpoint!, s.staging, s.prod) };
    const relabelledConsistency = {
      ...consistency,
      from_checkpoint: relabel(consistency.from_checkpoint!, s.staging, s.prod),
      to_checkpoint: relabel(consistency.to_checkpoint!, s.staging, s.prod),
    };
    expect(checkInclusionDocument(relabelledInclusion, prod)).toMatchObject({ ok: false, reason: expect.stringMatching(/for origin "staging\.example\/log"/) });
    expect(checkConsistencyDocument(relabelledConsistency, prod)).toMatchObject({ ok: false, reason: expect.stringMatching(/for origin "staging\.example\/log"/) });
    // The same documents under their own origin verify.
    expect(checkInclusionDocument(relabelledInclusion, prod, undefined, staging_origin)).toEqual({ ok: true });
    expect(checkConsistencyDocument(relabelledConsistency, prod, undefined, staging_origin)).toEqual({ ok: true, older: null, newer: null });
    expect(checkInclusionDocument(inclusion, parseVerifierKey(s.staging.verifierKey))).toEqual({ ok: true });
  });
});

describe("bursar verify --origin", () => {
  const dir = tempDir();
  afterAll(() => dir.remove());

  const io = () => capturedIo();

  it("prints the origin it verified, and exits 1 on a checkpoint of another log under the same key", async () => {
    const file = join(dir.path, "staging.jsonl");
    const cp = join(dir.path, "relabelled.txt");
    writeFileSync(file, s.relabelled);
    writeFileSync(cp, s.relabelledCheckpoint);
    const refused = io();
    expect(await verifyCommand.run([file, "--checkpoint", cp, "--key", s.prod.verifierKey], refused)).toBe(1);
    expect(refused.err()).toMatch(/^FAIL the checkpoint is for origin "staging\.example\/log", not "prod\.example\/log"/);
    const named = io();
    expect(await verifyCommand.run([file, "--checkpoint", cp, "--key", s.prod.verifierKey, "--origin", staging_origin], named)).toBe(0);
    expect(named.out()).toMatch(/; origin staging\.example\/log, log [0-9a-f]{64}, tree size 7, root /);
    await expect(verifyCommand.run([file, "--checkpoint", cp, "--key", s.prod.verifierKey, "--origin", ""], io())).rejects.toThrow(/--origin/);
  });

  it("checks proof files against the origin and names it on OK", async () => {
    const size = await s.t.log.treeSize();
    const proof = join(dir.path, "inclusion.json");
    const inclusion = await s.t.log.inclusionProof(2, size);
    writeFileSync(proof, JSON.stringify({ ...inclusion, checkpoint: relabel(inclusion.checkpoint!, s.staging, s.prod) }));
    const refused = io();
    expect(await verifyCommand.run(["--inclusion", proof, "--key", s.prod.verifierKey], refused)).toBe(1);
    expect(refused.err()).toMatch(/^FAIL inclusion proof: the checkpoint is for origin "staging\.example\/log"/);
    const ok = io();
    expect(await verifyCommand.run(["--inclusion", proof, "--key", s.prod.verifierKey, "--origin", staging_origin], ok)).toBe(0);
    expect(ok.out()).toBe(
      `OK inclusion proof verifies against a checkpoint of ${staging_origin} signed by ${prod_origin}+${s.prod.keyIdHex}: entry 2, leaf hash ${inclusion.leaf_hash}, is in the tree of size ${size}, root ${Buffer.from(inclusion.root_hash, "hex").toString("base64")} (the proof's checkpoint)\n`,
    );
  });
});

describe("a checkpoint's origin in a message", () => {
  it("is quoted cut at 80 characters, its control characters escaped, as every value from a file", () => {
    const verifier = parseVerifierKey(s.prod.verifierKey);
    const origin = `evil\u009b2J${"o".repeat(200)}`;
    expect(originProblem(origin, undefined, verifier)).toBe(
      `for origin "evil\\u009b2J${"o".repeat(73)}"…, not "${prod_origin}" (the key's name; pass --origin if the log's origin differs from it)`,
    );
  });
});
