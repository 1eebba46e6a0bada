// The data directory: secret files with mode 0600, and the operator token stored as a hash.

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "./config.js";
import { newToken } from "./ids.js";

export const operator_token_hash_file = "operator-token.sha256";
/** The simulator's webhook signing secret, kept across starts. */
export const webhook_secret_file_name = "webhook-secret";
/** The stored hash is the SHA-256 of the token in lowercase hex, nothing else. */
const operator_token_hash_pattern = /^[0-9a-f]{64}$/;

export function ensureDataDir(data_dir: string): void {
  mkdirSync(data_dir, { recursive: true, mode: 0o700 });
}

export function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code;
}

/** Writes `contents` to a new private file beside `path` (mode 0600) and returns its path. */
function stageSecretFile(path: string, contents: string): string {
  const staged = `${path}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(staged, contents, { mode: 0o600, flag: "wx" });
  chmodSync(staged, 0o600);
  return staged;
}

/**
 * Moves a staged file to `path` only if `path` does not exist yet, and removes the staged file.
 * A hard link is atomic and refuses an existing target, so of two processes racing on a fresh
 * data directory exactly one wins, and no reader ever sees a half-written file. Returns false
 * when `path` already existed (the caller re-reads it).
 */
function publishStagedFile(staged: string, path: string): boolean {
  try {
    linkSync(staged, path);
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    // A file system without hard links: exclusive create, still refusing an existing target.
    if (errorCode(error) !== "EPERM" && errorCode(error) !== "ENOTSUP" && errorCode(error) !== "EOPNOTSUPP") throw error;
    try {
      writeFileSync(path, readFileSync(staged), { mode: 0o600, flag: "wx" });
      return true;
    } catch (fallback) {
      if (errorCode(fallback) === "EEXIST") return false;
      throw fallback;
    }
  } finally {
    rmSync(staged, { force: true });
  }
}

/** Replaces `path` atomically (write aside, then rename), mode 0600. */
export function writeSecretFile(path: string, contents: string): void {
  renameSync(stageSecretFile(path, contents), path);
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

/** Reads a secret file from the data directory, creating it with `make()` on first use. Of two
 *  processes creating it at once, both end up with the value that was stored. */
export function secretFile(data_dir: string, name: string, make: () => string): { value: string; created: boolean } {
  const path = join(data_dir, name);
  const existing = readIfPresent(path);
  if (existing !== undefined) return { value: storedSecret(path, existing), created: false };
  ensureDataDir(data_dir);
  const value = make();
  if (publishStagedFile(stageSecretFile(path, `${value}\n`), path)) return { value, created: true };
  return { value: storedSecret(path, readFileSync(path, "utf8")), created: false };
}

/** A stored secret, trimmed; an empty one (a truncated file) would make an empty HMAC or
 *  sealing key that anyone can use, so it stops the start instead. */
function storedSecret(path: string, text: string): string {
  const value = text.trim();
  if (value === "") throw new ConfigError(`${path} is empty: restore it from a backup, or delete it to generate a new one (what it protected stops working)`);
  return value;
}

/** Secret files and the directory itself that group or others can read: worth a warning, not a
 *  chmod (the operator may have made them so on purpose). */
export function exposedDataDirPaths(data_dir: string, names: readonly string[]): string[] {
  const exposed: string[] = [];
  for (const path of [data_dir, ...names.map((name) => join(data_dir, name))]) {
    try {
      if ((statSync(path).mode & 0o077) !== 0) exposed.push(path);
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw error;
    }
  }
  return exposed;
}

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/** The stored hash, or undefined when there is none; a file that is not a hash stops the start. */
function storedOperatorHash(data_dir: string): Buffer | undefined {
  const path = join(data_dir, operator_token_hash_file);
  const text = readIfPresent(path);
  if (text === undefined) return undefined;
  const hex = text.trim();
  if (!operator_token_hash_pattern.test(hex)) {
    throw new ConfigError(
      `${path} is not an operator token hash (expected 64 hex characters): run \`bursar admin rotate\` to issue a new token, or set BURSAR_ADMIN_TOKEN`,
    );
  }
  return Buffer.from(hex, "hex");
}

/** A generated operator token whose hash is staged but not yet stored: see OperatorTokens.prepare. */
export interface PendingOperatorToken {
  /** Stores the hash unless another process stored one first. `shown` is the token to print,
   *  present only when this token is the one stored; `tokens` checks against what is stored. */
  commit(): { tokens: OperatorTokens; shown?: string };
  /** Forgets the token (the start failed before it could be shown). */
  discard(): void;
}

/** Checks operator tokens in constant time against the configured token or the stored hash. */
export class OperatorTokens {
  private constructor(private readonly hash: Buffer | null) {}

  static fromToken(token: string): OperatorTokens {
    return new OperatorTokens(sha256(token));
  }

  static none(): OperatorTokens {
    return new OperatorTokens(null);
  }

  get configured(): boolean {
    return this.hash !== null;
  }

  check(token: string | undefined): boolean {
    if (!this.hash || !token) return false;
    return timingSafeEqual(sha256(token), this.hash);
  }

  /**
   * BURSAR_ADMIN_TOKEN wins; else the stored hash; else (first start) a new token whose hash is
   * only staged: `pending.commit()` stores it once the token can be shown, so a start that fails
   * first leaves no hash of a token nobody saw. Until then `tokens` accepts the new token.
   */
  static prepare(data_dir: string, admin_token: string | undefined): { tokens: OperatorTokens; pending?: PendingOperatorToken } {
    if (admin_token) return { tokens: OperatorTokens.fromToken(admin_token) };
    const stored = storedOperatorHash(data_dir);
    if (stored) return { tokens: new OperatorTokens(stored) };
    ensureDataDir(data_dir);
    const token = newToken("bsr_op");
    const path = join(data_dir, operator_token_hash_file);
    const staged = stageSecretFile(path, `${sha256(token).toString("hex")}\n`);
    const pending: PendingOperatorToken = {
      commit: () => {
        if (publishStagedFile(staged, path)) return { tokens: OperatorTokens.fromToken(token), shown: token };
        return { tokens: new OperatorTokens(storedOperatorHash(data_dir) ?? null) };
      },
      discard: () => rmSync(staged, { force: true }),
    };
    return { tokens: OperatorTokens.fromToken(token), pending };
  }

  static rotate(data_dir: string): { tokens: OperatorTokens; generated: string } {
    ensureDataDir(data_dir);
    const token = newToken("bsr_op");
    writeSecretFile(join(data_dir, operator_token_hash_file), `${sha256(token).toString("hex")}\n`);
    return { tokens: OperatorTokens.fromToken(token), generated: token };
  }
}

export function randomSecret(): string {
  return randomBytes(32).toString("hex");
}
