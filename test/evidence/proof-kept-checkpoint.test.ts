// `bursar verify --consistency` tied to the checkpoint the auditor kept, and proofs whose OK
// line says what was proved. Two logs share one key and origin and differ from entry 1 on
// (history A, which the auditor saw, and a fork B the key holder serves later): a proof of B
// verifies on its own, and only the kept checkpoint of A tells them apart (RFC 9162 8.1.2).

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as verifyCommand from "../../src/cli/commands/verify.js";
import { parseVerifierKey } from "../../src/evidence/note.js";
import { checkConsistencyDocument, checkInclusionDocument, type ConsistencyProofDocument } from "../../src/evidence/proof.js";
import { capturedIo, newSigner, openTestLog, tempDir, type TestLog } from "./support.js";

const signer = newSigner();
const key = signer.verifierKey;
const signed_by = `of ${signer.name} signed by ${signer.name}+${signer.keyIdHex}`;
const dir = tempDir();
const file = (name: string) => join(dir.path, name);
const b64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");

/** A log of 15 entries (genesis + 14 of `history`) with checkpoints at sizes 5 and 15. */
async function history(name: string): Promise<{ t: TestLog; cp5: string; cp15: string }> {
  const t = await openTestLog({ signer });
  const append = (from: number, count: number) =>
    t.driver.transaction((tx) => t.log.appendMany(tx, Array.from({ length: count }, (_, n) => ({ kind: "gate.decision", source: "gate", body: { history: name, n: from + n } }))));
  await append(0, 4);
  const cp5 = await t.log.checkpoint();
  await append(4, 10);
  const cp15 = await t.log.checkpoint();
  expect([cp5.size, cp15.size]).toEqual([5, 15]);
  return { t, cp5: cp5.note, cp15: cp15.note };
}

let a: Awaited<ReturnType<typeof history>>;
let b: Awaited<ReturnType<typeof history>>;
let honest: ConsistencyProofDocument;
let fork: ConsistencyProofDocument;

beforeAll(async () => {
  a = await history("A");
  b = await history("B");
  honest = await a.t.log.consistencyProof(5, 15);
  fork = await b.t.log.consistencyProof(5, 15);
  expect(fork.from_root).not.toBe(honest.from_root);
  writeFileSync(file("a-cp5.txt"), a.cp5);
  writeFileSync(file("a-cp15.txt"), a.cp15);
  writeFileSync(file("honest.json"), JSON.stringify(honest));
  writeFileSync(file("fork.json"), JSON.stringify(fork));
});
afterAll(async () => {
  await a.t.driver.close();
  await b.t.driver.close();
  dir.remove();
});

async function verify(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = capturedIo();
  const code = await verifyCommand.run([...args, "--key", key], io);
  return { code, out: io.out(), err: io.err() };
}

describe("verify --consistency against the checkpoint the auditor kept", () => {
  it("fails a forked history with --from-checkpoint, naming both roots at the kept size", async () => {
    // On its own the fork's proof is consistent with the fork's own older checkpoint.
    expect((await verify(["--consistency", file("fork.json")])).code).toBe(0);
    const kept = await verify(["--consistency", file("fork.json"), "--from-checkpoint", file("a-cp5.txt")]);
    expect(kept).toMatchObject({ code: 1, out: "" });
    expect(kept.err).toBe(
      `FAIL consistency proof: the log's history differs from the checkpoint you kept (--from-checkpoint): at size 5 your checkpoint has root ${b64(honest.from_root)}, the proof ${b64(fork.from_root)}\n`,
    );
    expect(checkConsistencyDocument(fork, parseVerifierKey(key), undefined, undefined, a.cp5)).toMatchObject({ ok: false, reason: expect.stringMatching(/^the log's history differs/) });
  });

  it("takes a --checkpoint of the proof's older size as the older side, so the fork fails there too", async () => {
    const kept = await verify(["--consistency", file("fork.json"), "--checkpoint", file("a-cp5.txt")]);
    expect(kept.code).toBe(1);
    expect(kept.err).toMatch(/^FAIL consistency proof: the log's history differs from the checkpoint you kept \(--checkpoint\): at size 5 /);
    expect(kept.err).not.toMatch(/is for size 5, not 15/);
  });

  it("passes an honest extension of the kept checkpoint and prints both sizes and roots", async () => {
    const kept = await verify(["--consistency", file("honest.json"), "--from-checkpoint", file("a-cp5.txt")]);
    expect(kept).toEqual({
      code: 0,
      out: `OK consistency proof verifies against checkpoints ${signed_by}: tree size 5, root ${b64(honest.from_root)} (the checkpoint you kept, --from-checkpoint) -> tree size 15, root ${b64(honest.to_root)} (the proof's checkpoint)\n`,
      err: "",
    });
    const both = await verify(["--consistency", file("honest.json"), "--from-checkpoint", file("a-cp5.txt"), "--checkpoint", file("a-cp15.txt")]);
    expect(both.out).toMatch(/\(the checkpoint you kept, --from-checkpoint\) -> tree size 15, root \S+ \(your checkpoint, --checkpoint\)\n$/);
    const older = await verify(["--consistency", file("honest.json"), "--checkpoint", file("a-cp5.txt")]);
    expect(older.out).toMatch(/: tree size 5, root \S+ \(the checkpoint you kept, --checkpoint\) -> tree size 15, root \S+ \(the proof's checkpoint\)\n$/);
    const plain = await verify(["--consistency", file("honest.json")]);
    expect(plain.out).toBe(
      `OK consistency proof verifies against checkpoints ${signed_by}: tree size 5, root ${b64(honest.from_root)} (the proof's checkpoint) -> tree size 15, root ${b64(honest.to_root)} (the proof's checkpoint)\n` +
        "note: the older root is the proof's own; to tie it to the history you saw, pass the checkpoint you kept as --from-checkpoint\n",
    );
  });

  it("needs no checkpoint in the document for the older side when the auditor kept one", async () => {
    const verifier = parseVerifierKey(key);
    const bare = { ...honest, from_checkpoint: null };
    expect(checkConsistencyDocument(bare, verifier)).toMatchObject({ ok: false, reason: expect.stringMatching(/pass the one you kept as --from-checkpoint/) });
    expect(checkConsistencyDocument(bare, verifier, undefined, undefined, a.cp5)).toEqual({ ok: true, older: "--from-checkpoint", newer: null });
  });

  it("fails a fork that copies the kept root into the document: the proof does not lead to it", async () => {
    const forged = { ...fork, from_root: honest.from_root, from_checkpoint: a.cp5 };
    expect(checkConsistencyDocument(forged, parseVerifierKey(key), undefined, undefined, a.cp5)).toMatchObject({ ok: false, reason: expect.stringMatching(/proof does not lead to the first root/) });
  });

  it("fails a kept checkpoint of another size, and a --checkpoint of neither size, saying which sizes", async () => {
    const wrongSize = await verify(["--consistency", file("honest.json"), "--from-checkpoint", file("a-cp15.txt")]);
    expect(wrongSize).toMatchObject({ code: 1, err: "FAIL consistency proof: the checkpoint you kept (--from-checkpoint) is for size 15, but the proof is from size 5: fetch a proof with from=15\n" });
    writeFileSync(file("a-1-15.json"), JSON.stringify(await a.t.log.consistencyProof(1, 15)));
    const neither = await verify(["--consistency", file("a-1-15.json"), "--checkpoint", file("a-cp5.txt")]);
    expect(neither).toMatchObject({ code: 1, err: "FAIL consistency proof: the checkpoint (--checkpoint) is for size 5, but the proof runs from size 1 to 15\n" });
  });

  it("fails a kept checkpoint signed by another key", async () => {
    const stranger = await openTestLog();
    writeFileSync(file("stranger.txt"), (await stranger.log.checkpoint()).note);
    await stranger.driver.close();
    const other = await verify(["--consistency", file("honest.json"), "--from-checkpoint", file("stranger.txt")]);
    expect(other).toMatchObject({ code: 1, err: expect.stringMatching(/^FAIL consistency proof: the older checkpoint \(--from-checkpoint\): note has no verifiable signatures: it is signed only by "[^"]+\+[0-9a-f]{8}" \(another log's checkpoint, or another key\)\n/) });
  });
});

describe("verify --inclusion names the entry it proved", () => {
  const proof = () => a.t.log.inclusionProof(7, 15);

  it("prints the index, tree size, leaf hash and root on OK", async () => {
    const doc = await proof();
    writeFileSync(file("incl-7.json"), JSON.stringify(doc));
    const ok = await verify(["--inclusion", file("incl-7.json")]);
    expect(ok).toEqual({
      code: 0,
      out: `OK inclusion proof verifies against a checkpoint ${signed_by}: entry 7, leaf hash ${doc.leaf_hash}, is in the tree of size 15, root ${b64(doc.root_hash)} (the proof's checkpoint)\n`,
      err: "",
    });
    const trusted = await verify(["--inclusion", file("incl-7.json"), "--checkpoint", file("a-cp15.txt"), "--index", "7", "--leaf-hash", doc.leaf_hash.toUpperCase()]);
    expect(trusted.out).toMatch(/: entry 7, .* \(your checkpoint, --checkpoint\)\n$/);
  });

  it("fails a valid proof of another entry than --index or --leaf-hash names", async () => {
    const doc = await proof();
    const other = await a.t.log.inclusionProof(8, 15);
    const wrongIndex = await verify(["--inclusion", file("incl-7.json"), "--index", "8"]);
    expect(wrongIndex).toEqual({ code: 1, out: "", err: "FAIL inclusion proof: the proof is for entry 7, not entry 8 (--index)\n" });
    const wrongLeaf = await verify(["--inclusion", file("incl-7.json"), "--leaf-hash", other.leaf_hash]);
    expect(wrongLeaf).toEqual({ code: 1, out: "", err: `FAIL inclusion proof: the proof is for leaf hash ${doc.leaf_hash}, not ${other.leaf_hash} (--leaf-hash)\n` });
    expect(checkInclusionDocument(doc, parseVerifierKey(key), undefined, undefined, { index: 7, leaf_hash: doc.leaf_hash })).toEqual({ ok: true });
  });

  it("quotes an unknown key of a proof document cut at 80 characters, its control characters escaped", async () => {
    // zod writes the key into its message as it is: printed, it moved the cursor and erased the line.
    const name = `x\u001b[1A\u001b[2K\rOK inclusion proof verifies${"y".repeat(100)}`;
    writeFileSync(file("incl-extra.json"), JSON.stringify({ ...(await proof()), [name]: 1, other: 2 }));
    const extra = await verify(["--inclusion", file("incl-extra.json")]);
    expect(extra).toEqual({ code: 1, out: "", err: `FAIL inclusion proof: not the route's JSON shape (: unrecognized key ${JSON.stringify(name.slice(0, 80))}… and 1 more)\n` });
  });

  it("refuses the proof options in the wrong mode or malformed (UsageError, exit 2 from main)", async () => {
    await expect(verify(["--inclusion", file("incl-7.json"), "--from-checkpoint", file("a-cp5.txt")])).rejects.toThrow(/--from-checkpoint goes with --consistency/);
    await expect(verify(["--consistency", file("honest.json"), "--index", "3"])).rejects.toThrow(/--index and --leaf-hash go with --inclusion/);
    await expect(verify(["--inclusion", file("incl-7.json"), "--index", "07"])).rejects.toThrow(/--index: expected/);
    await expect(verify(["--inclusion", file("incl-7.json"), "--leaf-hash", "abc"])).rejects.toThrow(/--leaf-hash: expected 64 hex digits/);
    await expect(verify(["--consistency", file("fork.json"), "--from-checkpoint", ""])).rejects.toThrow(/cannot read checkpoint/);
  });
});

describe("bursar verify --help", () => {
  it("documents the kept checkpoint and the entry options", () => {
    for (const option of ["--from-checkpoint KEPT", "--index N", "--leaf-hash HASH"]) expect(verifyCommand.help).toContain(option);
  });
});
