// The checkpoint witness: the newest checkpoint kept outside the database, in one file replaced
// atomically, and a log opened against it refused when the database no longer holds it (an
// older copy put back, a new database, another history), before anything is written.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EvidenceLog, readTreeSize } from "../../src/evidence/store.js";
import { fileWitness, LogRolledBackError, WitnessError, type CheckpointWitness, type KeptCheckpoint } from "../../src/evidence/witness.js";
import { migratedDriver, newSigner, steppingClock, tempDir, test_origin } from "./support.js";

const entry = (n: number) => ({ kind: "gate.decision", source: "gate", body: { n } });

/** A witness that keeps what it is given in memory, and says it kept `kept`. */
function memoryWitness(kept?: KeptCheckpoint): CheckpointWitness & { given: number[] } {
  const given: number[] = [];
  return { place: "the witness", given, kept: () => kept, keep: (checkpoint) => void given.push(checkpoint.size), settled: async () => undefined };
}

describe("fileWitness", () => {
  const dirs: { remove(): void }[] = [];
  afterEach(() => dirs.splice(0).forEach((dir) => dir.remove()));
  function dir(): string {
    const made = tempDir("bursar-witness-");
    dirs.push(made);
    return made.path;
  }

  it("keeps the newest signed checkpoint it is given, never an older one, in one file and nothing beside it", async () => {
    const path = join(dir(), "last-checkpoint");
    const driver = await migratedDriver();
    const witness = fileWitness(path);
    expect(witness.kept()).toBeUndefined();
    const log = await EvidenceLog.open(driver, { signer: newSigner(), origin: test_origin, clock: steppingClock(), witness });
    await driver.transaction((tx) => log.appendMany(tx, [entry(1), entry(2)]));
    const newer = await log.checkpoint();
    await witness.settled();
    expect(readFileSync(path, "utf8")).toBe(newer.note);
    expect(fileWitness(path).kept()).toEqual({ origin: test_origin, size: 3, root_hash: newer.root_hash });
    witness.keep({ ...newer, size: 1, note: "older" });
    await witness.settled();
    expect(readFileSync(path, "utf8")).toBe(newer.note);
    expect(readdirSync(join(path, ".."))).toEqual(["last-checkpoint"]);
    await driver.close();
  });

  it("a file that is not a signed checkpoint is a WitnessError naming it and what to do", () => {
    const path = join(dir(), "last-checkpoint");
    writeFileSync(path, "");
    expect(() => fileWitness(path).kept()).toThrow(WitnessError);
    expect(() => fileWitness(path).kept()).toThrow(new RegExp(`^${path}: not a signed checkpoint .*remove it to start without that check`));
  });

  it("what is not a regular file there (a directory, a link, dangling or not) is a WitnessError naming it, not a stack or no check", () => {
    const place = dir();
    const path = join(place, "last-checkpoint");
    mkdirSync(path);
    expect(() => fileWitness(path).kept()).toThrow(new RegExp(`^${path}: not a regular file; it keeps the newest checkpoint`));
    rmSync(path, { recursive: true });
    symlinkSync(join(place, "nowhere"), path);
    expect(() => fileWitness(path).kept()).toThrow(WitnessError);
  });

  it("a write that fails is reported once until one succeeds, leaves no staged file, and the next checkpoint tries again", async () => {
    const place = dir();
    const path = join(place, "missing", "last-checkpoint");
    const errors: unknown[] = [];
    const witness = fileWitness(path, (error) => errors.push(error));
    const checkpoint = { size: 4, root_hash: "00".repeat(32), note: "note", created_at: "" };
    witness.keep(checkpoint);
    await witness.settled();
    witness.keep(checkpoint);
    await witness.settled();
    expect(errors).toHaveLength(1);
    expect(existsSync(path)).toBe(false);
    // The directory now exists: the same size is written, as it never was.
    mkdirSync(join(place, "missing"));
    witness.keep(checkpoint);
    await witness.settled();
    expect(readFileSync(path, "utf8")).toBe("note");
    expect(readdirSync(join(place, "missing"))).toEqual(["last-checkpoint"]);
  });
});

describe("EvidenceLog.open with a witness", () => {
  async function logOf(entries: number) {
    const driver = await migratedDriver();
    const signer = newSigner();
    const log = await EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock() });
    if (entries > 0) await driver.transaction((tx) => log.appendMany(tx, Array.from({ length: entries }, (_, n) => entry(n))));
    const checkpoint = await log.checkpoint();
    return { driver, signer, log, checkpoint };
  }
  const kept = (size: number, root_hash: string, origin = test_origin): KeptCheckpoint => ({ origin, size, root_hash });

  it("opens a log holding the kept checkpoint, or one past it, and keeps the newest checkpoint", async () => {
    const { driver, signer, log: first, checkpoint } = await logOf(3);
    await driver.transaction((tx) => first.appendMany(tx, [entry(9)]));
    const witness = memoryWitness(kept(checkpoint.size, checkpoint.root_hash));
    const log = await EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness });
    expect(witness.given).toEqual([checkpoint.size]);
    await log.checkpoint();
    expect(witness.given).toEqual([checkpoint.size, checkpoint.size + 1]);
    await driver.close();
  });

  it("refuses a log without the kept checkpoint (an older copy) and writes nothing", async () => {
    const { driver, signer, checkpoint } = await logOf(2);
    const witness = memoryWitness(kept(checkpoint.size + 5, "ab".repeat(32)));
    const opened = EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness });
    await expect(opened).rejects.toThrow(LogRolledBackError);
    await expect(opened).rejects.toThrow(/^the database holds a log of 3 entries and no checkpoint of 8, but the witness keeps a signed checkpoint of 8 entries .*restored from an older copy/);
    expect(await driver.read((tx) => readTreeSize(tx))).toBe(3);
    await driver.close();
  });

  it("refuses a new database before its genesis is written", async () => {
    const driver = await migratedDriver();
    const witness = memoryWitness(kept(7, "ab".repeat(32)));
    await expect(EvidenceLog.open(driver, { signer: newSigner(), origin: test_origin, clock: steppingClock(), witness })).rejects.toThrow(
      /^the database holds no log \(a new database\), but the witness keeps a signed checkpoint of 7 entries/,
    );
    expect(await driver.read((tx) => readTreeSize(tx))).toBe(0);
    await driver.close();
  });

  it("refuses a log whose checkpoint of the kept size has another root (another history)", async () => {
    const { driver, signer, checkpoint } = await logOf(2);
    const witness = memoryWitness(kept(checkpoint.size, "ab".repeat(32)));
    await expect(EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness })).rejects.toThrow(
      new RegExp(`^the database's checkpoint of 3 entries has root ${checkpoint.root_hash.slice(0, 16)}…, but the witness keeps .*another history`),
    );
    await driver.close();
  });

  it("refuses a checkpoint kept of another log's origin", async () => {
    const { driver, signer, checkpoint } = await logOf(1);
    const witness = memoryWitness(kept(checkpoint.size, checkpoint.root_hash, "other.example/log"));
    await expect(EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness })).rejects.toThrow(
      /of the log "other.example\/log", not of this one \("test.bursar\/log"\)/,
    );
    await driver.close();
  });

  it("on the same database under a changed origin, says to set the origin back (not that the database is another), and writes nothing", async () => {
    const { driver, signer, checkpoint } = await logOf(1);
    const witness = memoryWitness(kept(checkpoint.size, checkpoint.root_hash));
    const opened = EvidenceLog.open(driver, { signer, origin: "renamed.example/log", clock: steppingClock(), witness });
    await expect(opened).rejects.toThrow(
      'the log\'s origin is "test.bursar/log", but BURSAR_LOG_ORIGIN is "renamed.example/log": a log keeps the origin it was started with (every checkpoint and verifier key names it), so set BURSAR_LOG_ORIGIN back to "test.bursar/log"',
    );
    expect(await driver.read((tx) => readTreeSize(tx))).toBe(checkpoint.size);
    expect(witness.given).toEqual([]);
    await driver.close();
  });

  it("a database of another origin where the witness kept one of the configured origin is a foreign database to put back, not a setting to change", async () => {
    // The data directory served test_origin; a database started under another origin is put in its place.
    const { driver, signer } = await logOf(1);
    const witness = memoryWitness(kept(2, "ab".repeat(32), "renamed.example/log"));
    const opened = EvidenceLog.open(driver, { signer, origin: "renamed.example/log", clock: steppingClock(), witness });
    await expect(opened).rejects.toThrow(LogRolledBackError);
    await expect(opened).rejects.toThrow(/another history|restored from an older copy/);
    await driver.close();
  });

  it("a log that finds entries it saw gone keeps a signed checkpoint of what it saw, and tells its listeners once", async () => {
    const { driver, signer, log, checkpoint } = await logOf(4);
    await driver.transaction((tx) => log.appendMany(tx, [entry(8), entry(9)]));
    const witness = memoryWitness();
    const watched = await EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness });
    const lost: string[] = [];
    watched.onLost((error) => lost.push(error.message));
    // The database restored to the first checkpoint under the running process.
    await driver.transaction(async (tx) => {
      for (const statement of ["DROP TRIGGER IF EXISTS log_entries_no_delete", "DROP TRIGGER IF EXISTS log_head_forward_only"]) await tx.run(statement);
      await tx.run("DELETE FROM log_entries WHERE seq >= ?", [checkpoint.size]);
      await tx.run("UPDATE log_head SET size = ?", [checkpoint.size]);
    });
    await expect(watched.checkpoint()).rejects.toThrow(/no longer holds what this process saw: 5 entries stored, 7 seen/);
    await expect(watched.checkpoint()).rejects.toThrow(/no longer holds/);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lost).toHaveLength(1);
    // The checkpoint of 5 kept at the open, then what this process saw, signed.
    expect(witness.given).toEqual([checkpoint.size, 7]);
    await driver.close();
  });

  it("refuses a log shorter than the kept checkpoint though its checkpoint of that size is still stored", async () => {
    const { driver, signer, checkpoint } = await logOf(3);
    await driver.transaction(async (tx) => {
      for (const statement of ["DROP TRIGGER IF EXISTS log_entries_no_delete", "DROP TRIGGER IF EXISTS log_head_forward_only"]) await tx.run(statement);
      await tx.run("DELETE FROM log_entries WHERE seq = ?", [checkpoint.size - 1]);
      await tx.run("UPDATE log_head SET size = ?", [checkpoint.size - 1]);
    });
    const witness = memoryWitness(kept(checkpoint.size, checkpoint.root_hash));
    await expect(EvidenceLog.open(driver, { signer, origin: test_origin, clock: steppingClock(), witness })).rejects.toThrow(
      /^the database holds a log of 3 entries, but the witness keeps a signed checkpoint of 4 entries/,
    );
    await driver.close();
  });
});
