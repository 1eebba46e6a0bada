// `bursar key`, `bursar export` and `bursar verify` end to end on a file database.

import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as exportCommand from "../../src/cli/commands/export.js";
import * as keyCommand from "../../src/cli/commands/key.js";
import * as verifyCommand from "../../src/cli/commands/verify.js";
import { systemClock } from "../../src/clock.js";
import { createLogSigner, loadSigningKey } from "../../src/evidence/keys.js";
import { EvidenceLog } from "../../src/evidence/store.js";
import { capturedIo, migratedDriver, tempDir } from "./support.js";

const io = capturedIo;

const dir = tempDir();
const env = () => ({ BURSAR_DATA_DIR: dir.path });
let verifierKey = "";

beforeAll(async () => {
  const keyIo = io(env());
  expect(await keyCommand.run([], keyIo)).toBe(0);
  verifierKey = keyIo.out().trim();
  const driver = await migratedDriver(join(dir.path, "bursar.db"));
  const signer = createLogSigner(loadSigningKey(join(dir.path, "signing-key.pem")), "bursar.local/log");
  const log = await EvidenceLog.open(driver, { signer, origin: "bursar.local/log", clock: systemClock });
  await driver.transaction((tx) =>
    log.appendMany(tx, Array.from({ length: 40 }, (_, n) => ({ kind: "gate.decision", source: "gate", body: { n } }))),
  );
  await driver.close();
});
afterAll(() => dir.remove());

describe("bursar key", () => {
  it("generates the signing key once with mode 0600 and prints the same verifier key after", async () => {
    expect(statSync(join(dir.path, "signing-key.pem")).mode & 0o777).toBe(0o600);
    expect(verifierKey).toMatch(/^bursar\.local\/log\+[0-9a-f]{8}\+[A-Za-z0-9+/]+=*$/);
    const again = io(env());
    await keyCommand.run([], again);
    expect(again.out().trim()).toBe(verifierKey);
    expect(again.err()).toBe("");
  });
});

describe("bursar export and verify", () => {
  const out = join(dir.path, "log.jsonl");
  const cp = join(dir.path, "cp.txt");

  it("exports, then verifies with only the file, checkpoint and key", async () => {
    const exportIo = io(env());
    expect(await exportCommand.run(["--out", out, "--checkpoint", cp], exportIo)).toBe(0);
    expect(exportIo.out()).toMatch(/exported 41 entries/);
    const verifyIo = io({});
    expect(await verifyCommand.run([out, "--checkpoint", cp, "--key", verifierKey, "--all-receipts"], verifyIo)).toBe(0);
    expect(verifyIo.out()).toMatch(/^OK 41 entries, 3 checkpoints, receipt signatures checked: 41 of 41; /);
  });

  it("exits 1 naming the seq of an altered entry", async () => {
    const tampered = join(dir.path, "tampered.jsonl");
    const lines = readFileSync(out, "utf8").split("\n");
    const altered = lines.findIndex((line) => line.includes('{"n":17}'));
    lines[altered] = (lines[altered] as string).replace('{"n":17}', '{"n":71}');
    writeFileSync(tampered, lines.join("\n"));
    const verifyIo = io({});
    expect(await verifyCommand.run([tampered, "--checkpoint", cp, "--key", verifierKey], verifyIo)).toBe(1);
    // The line named is the altered entry's own (1-based), not its receipt's after it.
    expect(verifyIo.err()).toMatch(new RegExp(`^FAIL seq 18: entry altered.*\\(line ${altered + 1}\\)\n  first bad entry: seq 18$`, "m"));
  });

  it("exits 1 naming a receipt moved onto another entry as that entry's receipt, not as an altered entry", async () => {
    const tampered = join(dir.path, "misplaced.jsonl");
    const lines = readFileSync(out, "utf8").split("\n");
    const receiptOf = (n: number) => lines.findIndex((line, i) => i > 0 && lines[i - 1]!.includes(`{"n":${n}}`));
    const [from, onto] = [receiptOf(16), receiptOf(17)];
    const leaf = (JSON.parse(lines[from]!) as { receipt: { leaf_hash: string; seq: number } }).receipt;
    expect(leaf.seq).toBe(17);
    lines[onto] = lines[from]!;
    writeFileSync(tampered, lines.filter((_, i) => i !== from).join("\n"));
    const verifyIo = io({});
    expect(await verifyCommand.run([tampered, "--checkpoint", cp, "--key", verifierKey], verifyIo)).toBe(1);
    // The line named is the misplaced receipt's (1-based, one line up once it left entry 17).
    expect(verifyIo.err()).toBe(
      `FAIL seq 18: carries the receipt of another entry (seq 17, leaf hash ${leaf.leaf_hash}): a receipt moved or copied from that entry, not a sign that this entry was altered (line ${onto})\n  first bad entry: seq 18\n`,
    );
  });

  it("counts only receipt signatures it checked, and exits 1 on a tail entry nothing signed vouches for", async () => {
    const plain = io({});
    expect(await verifyCommand.run([out, "--checkpoint", cp, "--key", verifierKey], plain)).toBe(0);
    expect(plain.out()).toMatch(/^OK 41 entries, 3 checkpoints, receipt signatures checked: 0 of 41 \(the rest match entries a signed checkpoint covers\); /);

    // An auditor's older checkpoint (size 1), and an export whose later checkpoint lines are gone.
    const lines = readFileSync(out, "utf8").split("\n").filter(Boolean);
    const checkpointLines = lines.filter((line) => line.startsWith('{"checkpoint":'));
    const older = join(dir.path, "cp-1.txt");
    writeFileSync(older, (JSON.parse(checkpointLines[0]!) as { checkpoint: string }).checkpoint);
    const tail = lines.filter((line) => !checkpointLines.slice(1).includes(line));
    const tailFile = join(dir.path, "tail.jsonl");
    writeFileSync(tailFile, `${tail.join("\n")}\n`);
    const vouched = io({});
    expect(await verifyCommand.run([tailFile, "--checkpoint", older, "--key", verifierKey], vouched)).toBe(0);
    expect(vouched.out()).toMatch(/^OK 41 entries, 2 checkpoints, receipt signatures checked: 40 of 41 \(the rest/);
    expect(vouched.out()).toMatch(/^note: 40 entries after the last signed checkpoint rest on their own receipts of this log \(signatures checked\)$/m);

    const lastReceipt = tail.map((line) => line.startsWith('{"receipt":')).lastIndexOf(true);
    const unreceiptedFile = join(dir.path, "unreceipted.jsonl");
    writeFileSync(unreceiptedFile, `${tail.filter((_, i) => i !== lastReceipt).join("\n")}\n`);
    const failed = io({});
    expect(await verifyCommand.run([unreceiptedFile, "--checkpoint", older, "--key", verifierKey], failed)).toBe(1);
    expect(failed.err()).toMatch(/^FAIL seq 40: no receipt, and no signed checkpoint covers it.*\n  first bad entry: seq 40$/m);
  });

  it("refuses bad usage with UsageError (exit 2 from main)", async () => {
    await expect(verifyCommand.run([out, "--checkpoint", cp], io({}))).rejects.toThrow(/--key/);
    await expect(verifyCommand.run([out, "--key", verifierKey], io({}))).rejects.toThrow(/--checkpoint/);
    await expect(exportCommand.run([], io(env()))).rejects.toThrow(/--out/);
  });

  it("names damage done in transfer to the export or the checkpoint, by the whole file, not an entry", async () => {
    const crlf = join(dir.path, "crlf.jsonl");
    writeFileSync(crlf, readFileSync(out, "utf8").replaceAll("\n", "\r\n"));
    const crlfIo = io({});
    expect(await verifyCommand.run([crlf, "--checkpoint", cp, "--key", verifierKey], crlfIo)).toBe(1);
    expect(crlfIo.err()).toMatch(/^FAIL the export has CRLF line endings .*\(line 1\)\n  the export file$/m);
    const bom = join(dir.path, "bom.jsonl");
    writeFileSync(bom, `\ufeff${readFileSync(out, "utf8")}`);
    const bomIo = io({});
    expect(await verifyCommand.run([bom, "--checkpoint", cp, "--key", verifierKey], bomIo)).toBe(1);
    expect(bomIo.err()).toMatch(/^FAIL the export starts with a byte order mark.*\n  the export file$/m);
    const blank = join(dir.path, "blank.jsonl");
    writeFileSync(blank, readFileSync(out, "utf8").replace("\n", "\n\n"));
    const blankIo = io({});
    expect(await verifyCommand.run([blank, "--checkpoint", cp, "--key", verifierKey], blankIo)).toBe(1);
    expect(blankIo.err()).toMatch(/^FAIL an empty line, which no export holds \(line 2\)\n  the export file$/m);
    const empty = join(dir.path, "empty.jsonl");
    writeFileSync(empty, "");
    const emptyIo = io({});
    expect(await verifyCommand.run([empty, "--checkpoint", cp, "--key", verifierKey], emptyIo)).toBe(1);
    expect(emptyIo.err()).toMatch(/^FAIL the export is empty\n  the export file$/m);
    const headless = join(dir.path, "headless.jsonl");
    writeFileSync(headless, readFileSync(out, "utf8").replace('"v":1', '"v":2'));
    const headlessIo = io({});
    expect(await verifyCommand.run([headless, "--checkpoint", cp, "--key", verifierKey], headlessIo)).toBe(1);
    expect(headlessIo.err()).toMatch(/^FAIL line 1 is not a bursar export header \(v 1\).*\n  the export file$/m);
    const cut = join(dir.path, "cp-cut.txt");
    writeFileSync(cut, readFileSync(cp, "utf8").trimEnd());
    const cutIo = io({});
    expect(await verifyCommand.run([out, "--checkpoint", cut, "--key", verifierKey], cutIo)).toBe(1);
    expect(cutIo.err()).toMatch(/^FAIL the checkpoint is not a signed note: malformed note: it does not end with a newline/);
  });

  it("refuses an empty --checkpoint path, and --all-receipts without an export", async () => {
    const driver = await migratedDriver(join(dir.path, "bursar.db"));
    const signer = createLogSigner(loadSigningKey(join(dir.path, "signing-key.pem")), "bursar.local/log");
    const log = await EvidenceLog.open(driver, { signer, origin: "bursar.local/log", clock: systemClock });
    const proof = join(dir.path, "consistency-empty.json");
    writeFileSync(proof, JSON.stringify(await log.consistencyProof(1, (await log.latestCheckpoint())!.size)));
    await driver.close();
    // An unset variable in a script ("--checkpoint $KEPT") must not quietly drop the check.
    await expect(verifyCommand.run(["--consistency", proof, "--checkpoint", "", "--key", verifierKey], io({}))).rejects.toThrow(/checkpoint: the path given is empty/);
    await expect(verifyCommand.run(["--inclusion", proof, "--checkpoint", "", "--key", verifierKey], io({}))).rejects.toThrow(/the path given is empty/);
    await expect(verifyCommand.run(["--consistency", proof, "--all-receipts", "--key", verifierKey], io({}))).rejects.toThrow(/--all-receipts/);
    await expect(verifyCommand.run(["--inclusion", "", "--key", verifierKey], io({}))).rejects.toThrow(/the path given is empty/);
  });

  it("verifies proof files in the routes' JSON shape", async () => {
    const driver = await migratedDriver(join(dir.path, "bursar.db"));
    const signer = createLogSigner(loadSigningKey(join(dir.path, "signing-key.pem")), "bursar.local/log");
    const log = await EvidenceLog.open(driver, { signer, origin: "bursar.local/log", clock: systemClock });
    const size = (await log.latestCheckpoint())!.size;
    const inclusion = join(dir.path, "inclusion.json");
    writeFileSync(inclusion, JSON.stringify(await log.inclusionProof(7, size)));
    const consistency = join(dir.path, "consistency.json");
    writeFileSync(consistency, JSON.stringify(await log.consistencyProof(1, size)));
    await driver.close();
    const ok = io({});
    expect(await verifyCommand.run(["--inclusion", inclusion, "--key", verifierKey], ok)).toBe(0);
    expect(await verifyCommand.run(["--consistency", consistency, "--key", verifierKey], io({}))).toBe(0);
    const bad = JSON.parse(readFileSync(inclusion, "utf8")) as { index: number };
    bad.index = 8;
    writeFileSync(inclusion, JSON.stringify(bad));
    const failed = io({});
    expect(await verifyCommand.run(["--inclusion", inclusion, "--key", verifierKey], failed)).toBe(1);
    expect(failed.err()).toMatch(/^FAIL inclusion proof/);
  });
});
