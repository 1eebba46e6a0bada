// Shared helpers for the evidence tests: a migrated driver (SQLite, or PostgreSQL for a
// postgres:// URL from test/support/backends.ts), a signer, a stepping clock.

import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import type { CliIo } from "../../src/cli/command.js";
import type { Clock } from "../../src/clock.js";
import { exportLog } from "../../src/evidence/export.js";
import { createLogSigner, type LogSigner } from "../../src/evidence/keys.js";
import { EvidenceLog, type EvidenceLogOptions } from "../../src/evidence/store.js";
import { bufferLines, verifyExport, type VerifyReport } from "../../src/evidence/verify.js";
import type { SqlDriver } from "../../src/ledger/driver.js";
import { migration } from "../../src/ledger/migrations/002_evidence.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { SqliteDriver } from "../../src/ledger/sqlite.js";

export const test_origin = "test.bursar/log";

export function newSigner(origin = test_origin): LogSigner {
  return createLogSigner(generateKeyPairSync("ed25519").privateKey, origin);
}

/** A clock that starts at a fixed instant and moves only when told. */
export function steppingClock(start = Date.parse("2026-01-01T00:00:00.000Z")): Clock & { advance(ms: number): void } {
  let now = start;
  const clock = (() => new Date(now)) as Clock & { advance(ms: number): void };
  clock.advance = (ms: number) => {
    now += ms;
  };
  return clock;
}

export async function migratedDriver(path = ":memory:"): Promise<SqliteDriver> {
  const driver = new SqliteDriver({ path });
  await driver.migrate([migration]);
  return driver;
}

/** A migrated driver for `db`: a postgres:// URL (a fresh schema) or a SQLite path. */
export async function migratedDriverFor(db: string): Promise<SqlDriver> {
  if (!/^postgres(ql)?:\/\//.test(db)) return migratedDriver(db);
  const driver = new PostgresDriver({ url: db });
  await driver.migrate([migration]);
  return driver;
}

export interface TestLog {
  driver: SqlDriver;
  log: EvidenceLog;
  signer: LogSigner;
  clock: ReturnType<typeof steppingClock>;
}

export async function openTestLog(options: Partial<EvidenceLogOptions> & { path?: string } = {}): Promise<TestLog> {
  const driver = await migratedDriverFor(options.path ?? ":memory:");
  const signer = options.signer ?? newSigner(options.origin);
  const clock = steppingClock();
  const log = await EvidenceLog.open(driver, { signer, origin: options.origin ?? test_origin, clock, ...options });
  return { driver, log, signer, clock };
}

export function tempDir(prefix = "bursar-evidence-"): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A command's io whose stdout and stderr are collected for the test to read. */
export function capturedIo(env: NodeJS.ProcessEnv = {}): CliIo & { out(): string; err(): string } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: string[] = [];
  const err: string[] = [];
  stdout.on("data", (chunk: Buffer) => out.push(chunk.toString()));
  stderr.on("data", (chunk: Buffer) => err.push(chunk.toString()));
  return { stdout, stderr, env, interactive: false, stderr_interactive: false, out: () => out.join(""), err: () => err.join("") };
}

/** An export's lines, the signed checkpoint of its size as stored, and the log's verifier key. */
export interface Exported {
  lines: string[];
  checkpoint: string;
  key: string;
}

export async function exportAt(t: TestLog, size: number): Promise<Exported> {
  const chunks: string[] = [];
  await exportLog(t.driver, { size, exported_at: "2026-01-02T00:00:00.000Z", write: async (text) => void chunks.push(text) });
  const stored = await t.driver.read((tx) => tx.get<{ note: string }>("SELECT note FROM log_checkpoints WHERE tree_size = ?", [size]));
  return { lines: chunks.join("").split("\n").filter(Boolean), checkpoint: stored!.note, key: t.log.verifierKey };
}

/** Verifies `lines` (an export, as tampered) against `exported`'s checkpoint and key, or another checkpoint. */
export function verifyLines(exported: Exported, lines: string[], options: { allReceipts?: boolean; checkpoint?: string } = {}): VerifyReport {
  const bytes = Buffer.from(lines.map((line) => `${line}\n`).join(""), "utf8");
  return verifyExport(() => bufferLines(bytes), { checkpoint: options.checkpoint ?? exported.checkpoint, key: exported.key, allReceipts: options.allReceipts ?? false });
}

export const isEntryLine = (line: string) => line.startsWith('{"body":');
export const isReceiptLine = (line: string) => line.startsWith('{"receipt":');
export const isCheckpointLine = (line: string) => line.startsWith('{"checkpoint":');
export const checkpointLineSize = (line: string) => Number((JSON.parse(line) as { checkpoint: string }).checkpoint.split("\n")[1]);
