// The data directory: secret files with mode 0600, and the operator token stored as a hash.
// The directory and its secrets are trusted only when no one else can replace them.

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import {
  accessSync,
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ConfigError } from "./config.js";
import { newToken } from "./ids.js";

export const operator_token_hash_file = "operator-token.sha256";
/** The simulator's webhook signing secret, kept across starts. */
export const webhook_secret_file_name = "webhook-secret";
/** The stored hash is the SHA-256 of the token in lowercase hex, nothing else. */
const operator_token_hash_pattern = /^[0-9a-f]{64}$/;

/**
 * `mkdir -p`: creates `path` and its missing parents, one level at a time, each with `mode`.
 * Node's own recursive mkdir loops forever under a parent that exists but answers ENOENT for a
 * child (/proc/foo), synchronously, so not even SIGTERM stopped `bursar serve`; here that
 * ENOENT is thrown like any other failure. A `path` that exists but is not a directory fails
 * with mkdir's own EEXIST.
 */
export function makeDirectories(path: string, mode?: number): void {
  const missing: string[] = [];
  let current = resolve(path);
  for (;;) {
    let stat: Stats;
    try {
      stat = statSync(current);
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw error;
      missing.push(current);
      const parent = dirname(current);
      if (parent === current) break;
      current = parent;
      continue;
    }
    if (missing.length === 0 && !stat.isDirectory()) mkdirSync(current);
    break;
  }
  for (const directory of missing.reverse()) {
    try {
      mkdirSync(directory, { mode });
    } catch (error) {
      // Made meanwhile by someone else: as good as made here.
      if (errorCode(error) !== "EEXIST" || !statSync(directory).isDirectory()) throw error;
    }
  }
}

/** Creates the data directory (mode 0700) if missing, and refuses one others could write into. */
export function ensureDataDir(data_dir: string): void {
  makeDirectories(data_dir, 0o700);
  const problem = trustProblem(statSync(data_dir));
  if (problem === undefined) return;
  throw new ConfigError(`BURSAR_DATA_DIR=${data_dir}: ${problem.found}, so they could replace its secrets; ${problem.fix(data_dir, "700")}`);
}

export function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code;
}

/**
 * `text` as one shell word, to paste into a shell as it is printed: bare when it holds only
 * characters no shell reads specially, else single-quoted, or $'…'-quoted with control
 * characters as \xHH (so the line stays one line). A path with a space printed bare made
 * `chmod 700 /srv/my data` act on two paths.
 */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_/.,:@%+=-]+$/.test(text)) return text;
  if (!/[\u0000-\u001f\u007f]/.test(text)) return `'${text.replaceAll("'", "'\\''")}'`;
  const escaped = text.replace(/[\\']/g, (character) => `\\${character}`).replace(/[\u0000-\u001f\u007f]/g, (character) => `\\x${character.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return `$'${escaped}'`;
}

/** What makes a data directory or a secret in it untrustworthy, and the command that fixes it. */
interface TrustProblem {
  found: string;
  fix(path: string, mode: string): string;
}

/**
 * A file or directory someone other than this user (or root) can replace: writable by others
 * (a sticky bit does not help: they could create a missing secret first), or owned by another
 * user. Group write is left alone, as the operator may share the directory on purpose.
 */
function trustProblem(stat: Stats): TrustProblem | undefined {
  if ((stat.mode & 0o002) !== 0) {
    return { found: `writable by others (mode ${(stat.mode & 0o7777).toString(8).padStart(4, "0")})`, fix: (path, mode) => `run chmod ${mode} ${shellWord(path)}` };
  }
  // geteuid is missing on Windows, where modes and owners mean something else.
  const uid = process.geteuid?.();
  if (uid !== undefined && stat.uid !== uid && stat.uid !== 0) {
    return {
      found: `owned by another user (uid ${stat.uid}; this process runs as uid ${uid})`,
      fix: (path) => `run chown ${uid} ${shellWord(path)}, or use a directory of this user's`,
    };
  }
  return undefined;
}

/** Never blocking on open: a FIFO's open would otherwise wait for a writer forever. */
const open_read_nonblocking = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);
/** The same, refusing a symbolic link as the last component (the open fails with ELOOP). */
const open_read_nonblocking_nofollow = open_read_nonblocking | (constants.O_NOFOLLOW ?? 0);

function fileKind(stat: Stats): string {
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isDirectory()) return "a directory";
  if (stat.isSocket()) return "a socket";
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return "a device";
  return "something other than a file";
}

/**
 * The text of the regular file at `path` (a secret the user named: BURSAR_SIGNING_KEY), or
 * undefined when there is none. It is opened without blocking and checked on the open
 * descriptor, so what is checked is what is read: a FIFO, a device or a directory is a
 * ConfigError naming `subject` (`BURSAR_SIGNING_KEY=/run/key.pem`), not a start that hangs; so is
 * a file writable by others or owned by another user (root aside), as for a data-directory
 * secret: whoever can replace it signs. A symbolic link is followed (a mounted secret is often
 * one). Other file system errors pass through for fileError to word.
 */
export function readRegularFile(path: string, subject: string): string | undefined {
  return readChecked(path, subject, false);
}

/**
 * A secret in the data directory: as readRegularFile, and refused when it is a symbolic link
 * (whoever controls its target controls the secret).
 */
function readDataDirSecret(path: string): string | undefined {
  return readChecked(path, path, true);
}

function readChecked(path: string, subject: string, data_dir_secret: boolean): string | undefined {
  let descriptor: number;
  try {
    descriptor = openSync(path, data_dir_secret ? open_read_nonblocking_nofollow : open_read_nonblocking);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined;
    if (data_dir_secret && errorCode(error) === "ELOOP") {
      throw new ConfigError(`${subject}: a symbolic link; a secret in the data directory must be a regular file: replace the link with a copy of the file (mode 0600)`);
    }
    throw error;
  }
  try {
    const stat = fstatSync(descriptor);
    if (!stat.isFile()) throw new ConfigError(`${subject}: expected a regular file, found ${fileKind(stat)}`);
    const problem = trustProblem(stat);
    if (problem) throw new ConfigError(`${subject}: ${problem.found}, so they could replace this secret; ${problem.fix(path, "600")}`);
    return readFileSync(descriptor, "utf8");
  } finally {
    closeSync(descriptor);
  }
}

/**
 * A new name beside `path` to write it aside before publishing it: `<name>.<pid>-<12 hex>.tmp`,
 * which removeAbandonedStagedFiles knows, so one left by a killed writer is removed at a start.
 */
export function stagedPath(path: string): string {
  return `${path}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
}

/** Writes `contents` to a new private file beside `path` (mode 0600) and returns its path. */
function stageSecretFile(path: string, contents: string): string {
  const staged = stagedPath(path);
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

/** A file stagedPath named: `<name>.<pid>-<12 hex>.tmp`. */
const staged_file_name = /^[^/]+\.(\d+)-[0-9a-f]{12}\.tmp$/;

/** Whether process `pid` runs on this host (EPERM: it does, as another user). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) === "EPERM";
  }
}

/** A staged file younger than this is left alone whatever its pid says: a process in another
 *  PID namespace (a container sharing the volume) may be about to publish it. */
const staged_file_abandoned_after_ms = 60_000;

/**
 * Removes staged secret files whose writer is gone (killed between staging and publishing, or
 * left by an older bursar that staged the operator token's hash for the whole start): a copy of
 * a secret nobody will publish. Only files over a minute old whose pid runs nowhere here.
 */
export function removeAbandonedStagedFiles(data_dir: string): void {
  const now_ms = Date.now();
  for (const name of readdirSync(data_dir)) {
    const pid = staged_file_name.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid || processRuns(Number(pid))) continue;
    const path = join(data_dir, name);
    try {
      if (now_ms - statSync(path).mtimeMs < staged_file_abandoned_after_ms) continue;
    } catch (error) {
      if (errorCode(error) === "ENOENT") continue;
      throw error;
    }
    rmSync(path, { force: true });
  }
}

/** Replaces `path` atomically (write aside, then rename), mode 0600. */
export function writeSecretFile(path: string, contents: string): void {
  renameSync(stageSecretFile(path, contents), path);
}

/** Reads a secret file from the data directory, creating it with `make()` on first use. Of two
 *  processes creating it at once, both end up with the value that was stored. */
export function secretFile(data_dir: string, name: string, make: () => string): { value: string; path: string; created: boolean } {
  const path = join(data_dir, name);
  // The directory is checked before any secret in it is believed.
  ensureDataDir(data_dir);
  const existing = readDataDirSecret(path);
  if (existing !== undefined) return { value: storedSecret(path, existing), path, created: false };
  const value = make();
  if (publishStagedFile(stageSecretFile(path, `${value}\n`), path)) return { value, path, created: true };
  const stored = readDataDirSecret(path);
  if (stored === undefined) throw new ConfigError(`${path}: removed while it was being created; start again`);
  return { value: storedSecret(path, stored), path, created: false };
}

/** A data directory secret that is only read here, never created (the signing key for `bursar export`). */
export function existingSecretFile(data_dir: string, name: string): string | undefined {
  const path = join(data_dir, name);
  return readDataDirSecret(path);
}

/** A stored secret, trimmed; an empty one (a truncated file) would make an empty HMAC or
 *  sealing key that anyone can use, so it stops the start instead. */
function storedSecret(path: string, text: string): string {
  const value = text.trim();
  if (value === "") throw new ConfigError(`${path} is empty: restore it from a backup, or delete it to generate a new one (what it protected stops working)`);
  return value;
}

/** Secret files and the directory itself that group or others have any access to: worth a
 *  warning, not a chmod (the operator may have made them so on purpose). */
export function exposedDataDirPaths(data_dir: string, names: readonly string[]): string[] {
  return exposedPaths([data_dir, ...names.map((name) => join(data_dir, name))]);
}

/** Those of `paths` that group or others can read, write or search (a missing one is none). */
export function exposedPaths(paths: readonly string[]): string[] {
  const exposed: string[] = [];
  for (const path of paths) {
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
  const text = readDataDirSecret(path);
  if (text === undefined) return undefined;
  const hex = text.trim();
  if (!operator_token_hash_pattern.test(hex)) {
    throw new ConfigError(
      `${path} is not an operator token hash (expected 64 hex characters): run \`bursar admin rotate\` to issue a new token, or set BURSAR_ADMIN_TOKEN`,
    );
  }
  return Buffer.from(hex, "hex");
}

/** A generated operator token whose hash is not yet stored (a start that fails first just drops
 *  it): see OperatorTokens.prepare. */
export interface PendingOperatorToken {
  /** Stores the hash unless another process stored one first. `shown` is the token to print,
   *  present only when this token is the one stored; `tokens` checks against what is stored. */
  commit(): { tokens: OperatorTokens; shown?: string };
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
   * kept in memory: `pending.commit()` stores it once the token can be shown, so a start that
   * fails or is killed first leaves no file at all. Until then `tokens` accepts the new token.
   */
  static prepare(data_dir: string, admin_token: string | undefined): { tokens: OperatorTokens; pending?: PendingOperatorToken } {
    if (admin_token) return { tokens: OperatorTokens.fromToken(admin_token) };
    const stored = storedOperatorHash(data_dir);
    if (stored) return { tokens: new OperatorTokens(stored) };
    ensureDataDir(data_dir);
    // Refused now, not after the server listens: the hash is written only at commit.
    accessSync(data_dir, constants.W_OK);
    const token = newToken("bsr_op");
    const path = join(data_dir, operator_token_hash_file);
    // Until commit the hash lives only here: a start killed before it leaves no file behind.
    const pending: PendingOperatorToken = {
      commit: () => {
        if (publishStagedFile(stageSecretFile(path, `${sha256(token).toString("hex")}\n`), path)) return { tokens: OperatorTokens.fromToken(token), shown: token };
        return { tokens: new OperatorTokens(storedOperatorHash(data_dir) ?? null) };
      },
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
