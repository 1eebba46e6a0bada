// The evidence log over the storage port: appends inside the caller's transaction,
// gap-free sequence numbers, receipts, signed checkpoints, pages of entries and proofs.

import { performance } from "node:perf_hooks";
import type { Clock } from "../clock.js";
import type { SqlDriver, SqlTx } from "../ledger/driver.js";
import { Permits } from "../ledger/permits.js";
import { buildEntry, EvidenceInputError, type AppendInput, type Entry } from "./entry.js";
import { ForeignSigningKeyError, SigningKeyError, type LogSigner } from "./keys.js";
import { MerkleTree, verifyConsistency } from "./merkle.js";
import { formatCheckpoint, parseCheckpoint, signNote } from "./note.js";
import type { ConsistencyProofDocument, InclusionProofDocument } from "./proof.js";
import { signDeliveryReceipt, signReceiptFields, type DeliveryReceipt, type DeliveryReceiptFields, type LogIdentity, type Receipt } from "./receipt.js";
import { LogRolledBackError, type CheckpointWitness } from "./witness.js";
import { version } from "../version.js";

export const log_format_version = 1;
export const entries_page_max = 1000;
/** A page of entries stops once its entry text passes this many bytes of UTF-8 (16 MiB). */
export const entries_page_bytes_max = 16 * 1_048_576;
export const append_batch_max = 1000;
export const checkpoint_every_default = 1000;
export const checkpoint_seconds_default = 10;
export const checkpoint_every_max = 1_000_000;
export const checkpoint_seconds_max = 86_400;
export const config_digest_chars_max = 200;
/**
 * log_entries.receipt_signature holds a v2 receipt's signature behind this prefix (base64 has no
 * colon); a bare signature is a v1 receipt's, written before receipts named their log.
 */
export const receipt_signature_v2_prefix = "v2:";
/** Rows per multi-row INSERT: one statement per chunk keeps Postgres round trips low. */
const insert_rows_per_statement_max = 50;
/** Leaf hashes read per query when the in-memory tree catches up with the table. */
const sync_rows_per_query = 10_000;

/** The stored state disagrees with itself (a lost row, a rewritten history): never signed over. */
export class EvidenceIntegrityError extends Error {
  override name = "EvidenceIntegrityError";
}

/** A requested index or size is outside what the log holds; `param` names the query parameter. */
export class EvidenceRangeError extends Error {
  override name = "EvidenceRangeError";
  constructor(
    readonly param: string,
    readonly limit: number,
    message: string,
  ) {
    super(message);
  }
}

export interface EvidenceLogOptions {
  signer: LogSigner;
  /** The checkpoint origin line (BURSAR_LOG_ORIGIN). */
  origin: string;
  clock: Clock;
  /** Cut a checkpoint once this many entries are pending (BURSAR_CHECKPOINT_EVERY). */
  checkpoint_every?: number;
  /** Cut a checkpoint when entries are pending and this long passed since the last (BURSAR_CHECKPOINT_SECONDS). */
  checkpoint_seconds?: number;
  /** Milliseconds on a clock that only runs forward, for timed checkpoints (default performance.now). */
  monotonic_ms?: () => number;
  /** The software version recorded in system.genesis and system.start. */
  version?: string;
  /**
   * Keeps the newest checkpoint outside the database (src/evidence/witness.ts): open refuses a
   * log that no longer holds the one kept, before it writes anything.
   */
  witness?: CheckpointWitness;
}

export interface AppendResult {
  /** 0-based; equal to the entry's Merkle leaf index. */
  seq: number;
  /** Hex leaf hash. */
  leaf_hash: string;
  /** Absent for batch writers that sign one receipt for the whole batch (ingest deliveries). */
  receipt?: Receipt;
  /** The entry as stored (body scrubbed). When nothing was redacted its body is the writer's
   *  own body object, not a copy; the stored text was fixed at append either way. */
  entry: Entry;
}

/** What a single append returns: always with its own signed receipt. */
export type SignedAppendResult = AppendResult & { receipt: Receipt };

export interface StoredCheckpoint {
  size: number;
  /** Hex root hash. */
  root_hash: string;
  /** The signed note text (C2SP tlog-checkpoint in a signed-note). */
  note: string;
  created_at: string;
}

export interface StoredEntry {
  seq: number;
  leaf_hash: string;
  entry: Entry;
  receipt: Receipt | null;
}

/** One stored row as exported: the canonical text verbatim, its hash and receipt signature. */
export interface EntryRow {
  seq: number;
  kind: string;
  received_at: string;
  entry_text: string;
  leaf_hash: string;
  /** `v2:` + base64 for a v2 receipt, base64 alone for a v1 receipt, empty for none (batch writers). */
  receipt_signature: string;
}

/**
 * The entry's own signed receipt as its row stores it; null for a batch writer's entry (its batch
 * receipt covers it). `log` is the log's id (entry 0's leaf hash), carried by v2 receipts only.
 */
export function receiptOfRow(row: EntryRow, key_id: string, log: string): Receipt | null {
  const stored = row.receipt_signature;
  if (!stored) return null;
  const fields = { seq: row.seq, leaf_hash: row.leaf_hash, kind: row.kind, at: row.received_at };
  if (!stored.startsWith(receipt_signature_v2_prefix)) return { ...fields, key_id, signature: stored };
  return { ...fields, log, key_id, signature: stored.slice(receipt_signature_v2_prefix.length) };
}

interface CheckpointRow {
  tree_size: number | string;
  root_hash: string;
  note: string;
  created_at: string;
}

/** Postgres returns BIGINT as a string; both dialects end up as a checked JavaScript integer. */
function toIndex(value: number | string | bigint): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 0) throw new EvidenceIntegrityError(`bad stored integer ${String(value)}`);
  return number;
}

export async function readTreeSize(tx: SqlTx, lock = false): Promise<number> {
  const row = await tx.get<{ size: number | string }>(`SELECT size FROM log_head WHERE id = 1 ${lock ? tx.forUpdate : ""}`);
  if (!row) throw new EvidenceIntegrityError("log_head row is missing: was migration 2 applied?");
  return toIndex(row.size);
}

/** When the log's newest entry was received (ms), or -Infinity for a log with none. */
export async function readNewestEntryTime(tx: SqlTx): Promise<number> {
  const row = await tx.get<{ received_at: string }>("SELECT received_at FROM log_entries ORDER BY seq DESC LIMIT 1");
  const at_ms = row ? Date.parse(row.received_at) : Number.NaN;
  return Number.isFinite(at_ms) ? at_ms : -Infinity;
}

export async function readEntryRows(tx: SqlTx, start: number, end: number): Promise<EntryRow[]> {
  const rows = await tx.all<EntryRow>(
    "SELECT seq, kind, received_at, entry_text, leaf_hash, receipt_signature FROM log_entries WHERE seq >= ? AND seq < ? ORDER BY seq",
    [start, end],
  );
  return rows.map((row) => ({ ...row, seq: toIndex(row.seq) }));
}

/**
 * Where a page of entries from `start` ends: at `end`, or before the entry whose text would take
 * the page past entries_page_bytes_max (the first entry is always in). octet_length reads each
 * text's stored size (SQLite's record header, PostgreSQL's TOAST header), not the text: length()
 * counted characters by reading every entry whole, 400 ms for 200 entries of 3.9 MB.
 */
async function pageEnd(tx: SqlTx, start: number, end: number): Promise<number> {
  const sizes = await tx.all<{ bytes: number | string }>(
    "SELECT octet_length(entry_text) AS bytes FROM log_entries WHERE seq >= ? AND seq < ? ORDER BY seq",
    [start, end],
  );
  let bytes = 0;
  for (const [index, size] of sizes.entries()) {
    bytes += Number(size.bytes);
    if (index > 0 && bytes > entries_page_bytes_max) return start + index;
  }
  return end;
}

function toCheckpoint(row: CheckpointRow): StoredCheckpoint {
  return { size: toIndex(row.tree_size), root_hash: row.root_hash, note: row.note, created_at: row.created_at };
}

export async function readLatestCheckpoint(tx: SqlTx): Promise<StoredCheckpoint | undefined> {
  const row = await tx.get<CheckpointRow>(
    "SELECT tree_size, root_hash, note, created_at FROM log_checkpoints ORDER BY tree_size DESC LIMIT 1",
  );
  return row ? toCheckpoint(row) : undefined;
}

/** Stored checkpoints with from <= size <= to, oldest first. */
export async function readCheckpoints(tx: SqlTx, from: number, to: number): Promise<StoredCheckpoint[]> {
  const rows = await tx.all<CheckpointRow>(
    "SELECT tree_size, root_hash, note, created_at FROM log_checkpoints WHERE tree_size >= ? AND tree_size <= ? ORDER BY tree_size",
    [from, to],
  );
  return rows.map(toCheckpoint);
}

async function readCheckpointNote(tx: SqlTx, size: number): Promise<string | null> {
  const row = await tx.get<{ note: string }>("SELECT note FROM log_checkpoints WHERE tree_size = ?", [size]);
  return row?.note ?? null;
}

/**
 * Entry 0, which names the log's origin and key, and the log's id: its hex leaf hash, which v2
 * receipts sign and carry.
 */
export async function readGenesis(tx: SqlTx): Promise<{ entry: Entry; log: string } | undefined> {
  const row = await tx.get<{ entry_text: string; leaf_hash: string }>("SELECT entry_text, leaf_hash FROM log_entries WHERE seq = 0");
  return row ? { entry: JSON.parse(row.entry_text) as Entry, log: row.leaf_hash } : undefined;
}

/**
 * The log's entry 0 in a database that may hold none: undefined where it has no log table yet
 * (a database never served), without creating anything in it.
 */
export async function storedGenesis(driver: SqlDriver): Promise<Entry | undefined> {
  try {
    return (await driver.read((tx) => readGenesis(tx)))?.entry;
  } catch (error) {
    if (isMissingTable(error)) return undefined;
    throw error;
  }
}

/** SQLite's "no such table", PostgreSQL's undefined_table. */
export function isMissingTable(error: unknown): boolean {
  return /no such table/.test((error as Error).message) || (error as { code?: unknown }).code === "42P01";
}

/** The multi-row INSERT for each chunk size, built on first use (1..insert_rows_per_statement_max). */
const insert_sql_by_rows: string[] = [];

function insertSql(rows: number): string {
  const cached = insert_sql_by_rows[rows];
  if (cached !== undefined) return cached;
  const values = Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?, ?)").join(", ");
  const sql = `INSERT INTO log_entries (seq, kind, source, received_at, entry_text, leaf_hash, receipt_signature) VALUES ${values}`;
  insert_sql_by_rows[rows] = sql;
  return sql;
}

function checkPositiveInteger(name: string, value: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < 1 || value > max) throw new RangeError(`${name} must be an integer from 1 to ${max}`);
  return value;
}

/**
 * The one evidence log. Writers call `append`/`appendMany` inside their own transaction;
 * the server calls `tick()` on a timer and after commits to cut checkpoints.
 */
export class EvidenceLog {
  readonly origin: string;
  readonly verifierKey: string;
  private readonly signer: LogSigner;
  private readonly clock: Clock;
  private readonly monotonicMs: () => number;
  private readonly checkpointEvery: number;
  private readonly checkpointSeconds: number;
  private readonly version: string;
  private readonly witness: CheckpointWitness | undefined;
  private readonly lost_listeners: Array<(error: EvidenceIntegrityError) => void> = [];
  private lost = false;
  /** Holds committed leaves only: it is filled from the table, never from an open transaction. */
  private readonly tree = new MerkleTree();
  private readonly treeLock = new Permits();
  private readonly checkpointLock = new Permits();
  private checkpointing = false;
  /** The latest checkpoint's size as this process last read it, and when (monotonicMs). */
  private checkpointSeen: { size: number; at_ms: number };
  /** The leaf hash of entry 0, read when the log opens: what every receipt it signs names. */
  private logIdHex: string | undefined;

  private constructor(
    private readonly driver: SqlDriver,
    options: EvidenceLogOptions,
  ) {
    this.signer = options.signer;
    this.origin = options.origin;
    this.verifierKey = options.signer.verifierKey;
    this.clock = options.clock;
    this.monotonicMs = options.monotonic_ms ?? (() => performance.now());
    this.witness = options.witness;
    this.checkpointSeen = { size: -1, at_ms: this.monotonicMs() };
    this.checkpointEvery = checkPositiveInteger("checkpoint_every", options.checkpoint_every ?? checkpoint_every_default, checkpoint_every_max);
    this.checkpointSeconds = checkPositiveInteger(
      "checkpoint_seconds",
      options.checkpoint_seconds ?? checkpoint_seconds_default,
      checkpoint_seconds_max,
    );
    this.version = options.version ?? version;
  }

  /**
   * Opens the log on a migrated database: writes `system.genesis` into an empty log, refuses a
   * log started under another origin or key, and makes sure a first checkpoint exists.
   */
  static async open(driver: SqlDriver, options: EvidenceLogOptions): Promise<EvidenceLog> {
    parseCheckpoint(formatCheckpoint({ origin: options.origin, size: 0, rootHash: Buffer.alloc(32) }));
    const log = new EvidenceLog(driver, options);
    // Which is asked first: a witness that kept a checkpoint of the configured origin says this
    // data directory served that origin, so a database whose log has another is a foreign one, to
    // put back (the witness says so); otherwise the database's own log is asked first, and a
    // changed BURSAR_LOG_ORIGIN on the same database is a setting to put back, not a database to
    // restore. Both run before anything is written.
    if (log.witness?.kept()?.origin === log.origin) {
      await log.checkWitness();
      await log.checkOrigin();
    } else {
      await log.checkOrigin();
      await log.checkWitness();
    }
    await log.genesisIfEmpty();
    await log.checkIdentity();
    // The tree is brought up to the stored log now, not at the first checkpoint: a process started
    // just before its database is restored to an earlier point (a rolling restart) would otherwise
    // have seen nothing, and sign receipts and checkpoints over the lost entries.
    await log.syncTree();
    const latest = await log.latestCheckpoint();
    if (latest) log.witness?.keep(latest);
    else await log.checkpoint();
    return log;
  }

  /**
   * Refuses a log that no longer holds the checkpoint the witness kept: the database was restored
   * from an older copy, replaced (a new one starts with a genesis), or holds another history.
   */
  private async checkWitness(): Promise<void> {
    const witness = this.witness;
    const kept = witness?.kept();
    if (!witness || !kept) return;
    const { size, stored } = await this.driver.read(async (tx) => ({
      size: await readTreeSize(tx),
      stored: (await readCheckpoints(tx, kept.size, kept.size))[0],
    }));
    const what = `${witness.place} keeps a signed checkpoint of ${kept.size} entries (root ${kept.root_hash.slice(0, 16)}…) that a bursar on this data directory saw`;
    const advice =
      "Carrying on would forget holds, spending and idempotency keys the provider may already have acted on, so an agent could spend again what it spent (docs/configuration.md, \"Backups and restores\"). " +
      `Put back the database that holds that checkpoint; or, to carry on from this one knowingly, remove ${witness.place} and start again`;
    if (kept.origin !== this.origin) {
      throw new LogRolledBackError(`${what}, of the log ${JSON.stringify(kept.origin)}, not of this one (${JSON.stringify(this.origin)}): the database is not the one this data directory served. ${advice}`);
    }
    if (!stored || size < kept.size) {
      const holds = size === 0 ? "holds no log (a new database)" : stored ? `holds a log of ${size} entries` : `holds a log of ${size} entries and no checkpoint of ${kept.size}`;
      throw new LogRolledBackError(`the database ${holds}, but ${what}: it was restored from an older copy, replaced, or lost its last commits. ${advice}`);
    }
    if (stored.root_hash !== kept.root_hash) {
      throw new LogRolledBackError(
        `the database's checkpoint of ${kept.size} entries has root ${stored.root_hash.slice(0, 16)}…, but ${what}: the database holds another history. ${advice}`,
      );
    }
  }

  private async genesisIfEmpty(): Promise<void> {
    await this.driver.transaction(async (tx) => {
      if ((await readTreeSize(tx, true)) !== 0) return;
      const body = { origin: this.origin, key: this.verifierKey, key_id: this.signer.keyIdHex, version: this.version, log_format: log_format_version };
      await this.appendMany(tx, [{ kind: "system.genesis", source: "system", body }]);
    });
  }

  /** Refuses a log whose entry 0 names another origin than this process's; a database with no log yet passes. */
  private async checkOrigin(): Promise<void> {
    const genesis = (await this.driver.read((tx) => readGenesis(tx)))?.entry;
    const body = genesis?.body as { origin?: unknown } | undefined;
    if (genesis?.kind !== "system.genesis" || !body || body.origin === this.origin) return;
    throw new SigningKeyError(
      `the log's origin is ${JSON.stringify(body.origin)}, but BURSAR_LOG_ORIGIN is ${JSON.stringify(this.origin)}: a log keeps the origin it was started with (every checkpoint and verifier key names it), so set BURSAR_LOG_ORIGIN back to ${JSON.stringify(body.origin)}, or start a new log on a new database for the new origin`,
    );
  }

  private async checkIdentity(): Promise<void> {
    const stored = await this.driver.read((tx) => readGenesis(tx));
    const genesis = stored?.entry;
    const body = genesis?.body as { origin?: unknown; key?: unknown } | undefined;
    if (!genesis || genesis.kind !== "system.genesis" || !body) throw new EvidenceIntegrityError("entry 0 is not system.genesis");
    await this.checkOrigin();
    if (body.key !== this.verifierKey) {
      throw new ForeignSigningKeyError(
        `the signing key (${this.verifierKey}) is not the key this log was started with (${String(body.key)}): restore that key (BURSAR_SIGNING_KEY, or signing-key.pem in the data directory), or start a new log on a new database`,
      );
    }
    this.logIdHex = stored?.log;
  }

  /** The log's id: the hex leaf hash of its entry 0 (system.genesis), named by every v2 receipt. */
  get logId(): string {
    if (this.logIdHex === undefined) throw new EvidenceIntegrityError("the log's entry 0 has not been read");
    return this.logIdHex;
  }

  /** What a v2 receipt of this log signs besides its own fields. */
  private identity(log = this.logId): LogIdentity {
    return { origin: this.origin, log };
  }

  /**
   * Appends `system.start` in its own transaction: the version, a digest of the configuration and,
   * when given, which provider the process sends orders to (`simulator`: the one it mounts).
   */
  async recordStart(config_digest: string, provider?: string): Promise<SignedAppendResult> {
    if (typeof config_digest !== "string" || config_digest.length > config_digest_chars_max) {
      throw new EvidenceInputError(`config_digest must be a string of at most ${config_digest_chars_max} characters`);
    }
    const body = { version: this.version, config_digest, ...(provider === undefined ? {} : { provider }) };
    return this.driver.transaction((tx) => this.append(tx, { kind: "system.start", source: "system", body }));
  }

  /** Appends one entry inside the caller's open write transaction. */
  async append(tx: SqlTx, input: AppendInput): Promise<SignedAppendResult> {
    const [result] = await this.appendMany(tx, [input]);
    return result as SignedAppendResult;
  }

  /**
   * Appends entries in order inside the caller's open write transaction. Takes the log's
   * sequence lock (log_head) first; a rollback of the caller's transaction takes the entries with it.
   * With `last`, the caller's transaction runs nothing after this append: the final INSERT goes
   * with its COMMIT (SqlTx.runWithCommit), which releases the sequence lock a round trip sooner.
   */
  async appendMany(tx: SqlTx, inputs: readonly AppendInput[], options: { receipts?: boolean; last?: boolean } = {}): Promise<AppendResult[]> {
    if (inputs.length === 0) return [];
    if (inputs.length > append_batch_max) throw new EvidenceInputError(`at most ${append_batch_max} entries per append`);
    // A batch writer that signs one receipt for the whole batch skips the per-entry signature
    // (the costliest step of an append); its entries are covered by that receipt and by checkpoints.
    const sign = options.receipts ?? true;
    const first = await readTreeSize(tx, true);
    // The stored log is shorter than this process's tree, synced from committed rows when the log
    // opened and at each checkpoint: it was restored or failed over (see syncTree). Entries
    // appended now would take seqs a checkpoint already covers, and their receipts would be
    // second, conflicting signatures for those seqs. (Entries appended since the last sync are not covered here: no
    // hook tells this process which of its appends committed.)
    if (first < this.tree.size) throw this.lostEntries(first, this.tree.size);
    const received_at = this.clock().toISOString();
    const built = inputs.map((input, i) => buildEntry(input, first + i, received_at));
    // The genesis append names the log it starts: its own entry 0.
    const identity = sign ? this.identity(first === 0 ? built[0]!.leafHash.toString("hex") : undefined) : undefined;
    const results: AppendResult[] = built.map(({ entry, leafHash }) => {
      const leaf_hash = leafHash.toString("hex");
      if (!identity) return { seq: entry.seq, leaf_hash, entry };
      const receipt = signReceiptFields(this.signer, { seq: entry.seq, leaf_hash, kind: entry.kind, at: received_at }, identity);
      return { seq: entry.seq, leaf_hash, receipt, entry };
    });
    for (let start = 0; start < built.length; start += insert_rows_per_statement_max) {
      const chunk = built.slice(start, start + insert_rows_per_statement_max);
      const params = chunk.flatMap(({ entry, text }, i) => {
        const result = results[start + i]!;
        const signature = result.receipt ? receipt_signature_v2_prefix + result.receipt.signature : "";
        return [entry.seq, entry.kind, entry.source, received_at, text, result.leaf_hash, signature];
      });
      if (options.last && start + insert_rows_per_statement_max >= built.length) tx.runWithCommit(insertSql(chunk.length), params);
      else await tx.run(insertSql(chunk.length), params);
    }
    return results;
  }

  /** Signs an ingest delivery's v2 receipt with the log key: one signature lists every record. */
  signDelivery(fields: DeliveryReceiptFields): DeliveryReceipt {
    return signDeliveryReceipt(this.signer, fields, this.identity());
  }

  /** The committed tree size (number of entries). */
  async treeSize(): Promise<number> {
    return this.driver.read((tx) => readTreeSize(tx));
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | undefined> {
    return this.driver.read((tx) => readLatestCheckpoint(tx));
  }

  /**
   * Brings the in-memory tree up to the committed head by reading the leaf hashes it lacks.
   * Returns the committed size it reached. First it checks that the table still holds the last
   * leaf this process has seen: a database restored to an earlier point, or a failover to a
   * replica that missed the last commits, loses entries that checkpoints may already cover, and
   * signing on top of the tree held here would sign entries no store holds (or, once the log has
   * grown back, a root its entries do not make). That is refused loudly, never signed over.
   */
  private async syncTree(): Promise<number> {
    return this.treeLock.run(async () => {
      const seen = this.tree.size;
      const { target, last } = await this.driver.read(async (tx) => ({
        target: await readTreeSize(tx),
        last: seen === 0 ? undefined : await tx.get<{ leaf_hash: string }>("SELECT leaf_hash FROM log_entries WHERE seq = ?", [seen - 1]),
      }));
      if (seen > 0 && (target < seen || last?.leaf_hash !== this.tree.leaf(seen - 1).toString("hex"))) throw this.lostEntries(target, seen, last !== undefined);
      while (this.tree.size < target) {
        const from = this.tree.size;
        const to = Math.min(target, from + sync_rows_per_query);
        const rows = await this.driver.read((tx) =>
          tx.all<{ seq: number | string; leaf_hash: string }>(
            "SELECT seq, leaf_hash FROM log_entries WHERE seq >= ? AND seq < ? ORDER BY seq",
            [from, to],
          ),
        );
        if (rows.length !== to - from) throw new EvidenceIntegrityError(`log_entries lacks rows in ${from}..${to - 1}`);
        for (const row of rows) {
          if (toIndex(row.seq) !== this.tree.size) throw new EvidenceIntegrityError(`log_entries has a gap at ${this.tree.size}`);
          this.tree.append(Buffer.from(row.leaf_hash, "hex"));
        }
      }
      return target;
    });
  }

  /** Cuts and stores a signed checkpoint for the committed tree now (or returns the latest if nothing is new). */
  async checkpoint(): Promise<StoredCheckpoint> {
    const checkpoint = await this.checkpointLock.run(async () => {
      const size = await this.syncTree();
      return this.driver.transaction(async (tx) => {
        // The log's lock orders checkpoints across instances: unlocked, two could both read the
        // same latest one, and the smaller be stored after the larger had committed.
        await readTreeSize(tx, true);
        const previous = await readLatestCheckpoint(tx);
        if (previous && previous.size >= size) return previous;
        const root = this.tree.root(size);
        if (previous) this.assertExtends(previous, size, root);
        const note = signNote(formatCheckpoint({ origin: this.origin, size, rootHash: root }), this.signer);
        const created_at = this.clock().toISOString();
        await tx.run(
          "INSERT INTO log_checkpoints (tree_size, root_hash, note, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (tree_size) DO NOTHING",
          [size, root.toString("hex"), note, created_at],
        );
        return (await readCheckpoints(tx, size, size))[0]!;
      });
    });
    this.witness?.keep(checkpoint);
    return checkpoint;
  }

  /**
   * At a stop: a checkpoint of every entry committed (unless the database has failed), kept by the
   * witness, whose writes are awaited.
   */
  async finalCheckpoint(): Promise<void> {
    await this.checkpoint().catch(() => undefined);
    await this.witness?.settled();
  }

  /** The log no longer holds entries this process saw committed: `stored` entries, `seen` seen. */
  private lostEntries(stored: number, seen: number, last_present = false): EvidenceIntegrityError {
    const error = new EvidenceIntegrityError(
      `the stored log no longer holds what this process saw: ${stored} entries stored, ${seen} seen, and entry ${seen - 1} ` +
        `${last_present ? "differs" : "is gone"} (was the database restored or failed over to a replica that lacked the last commits?); refusing to sign`,
    );
    if (!this.lost) {
      this.lost = true;
      // What this process saw, signed and kept outside the database: a restart on the database
      // that lost it is refused, as one on a database restored while it was stopped.
      const root = this.tree.root(seen);
      const note = signNote(formatCheckpoint({ origin: this.origin, size: seen, rootHash: root }), this.signer);
      this.witness?.keep({ size: seen, root_hash: root.toString("hex"), note, created_at: this.clock().toISOString() });
      for (const listener of this.lost_listeners) queueMicrotask(() => listener(error));
    }
    return error;
  }

  /**
   * Called once, when the log finds the database no longer holds entries this process saw (it
   * was restored, or failed over to a replica that lacked the last commits): from then on no
   * entry can be appended and nothing signed, so the server stops.
   */
  onLost(listener: (error: EvidenceIntegrityError) => void): void {
    this.lost_listeners.push(listener);
  }

  /** Refuses to sign a tree that is not an append-only extension of the previous checkpoint. */
  private assertExtends(previous: StoredCheckpoint, size: number, root: Buffer): void {
    const proof = this.tree.consistencyProof(previous.size, size);
    const check = verifyConsistency(previous.size, size, proof, Buffer.from(previous.root_hash, "hex"), root);
    if (!check.ok) {
      throw new EvidenceIntegrityError(
        `refusing to sign: tree of size ${size} is not consistent with checkpoint of size ${previous.size} (${check.reason})`,
      );
    }
  }

  /**
   * Cuts a checkpoint when at least checkpoint_every entries are pending, or when any are
   * pending and checkpoint_seconds passed since the last one. Cheap when there is nothing to do.
   */
  async tick(): Promise<StoredCheckpoint | undefined> {
    if (this.checkpointing) return undefined;
    this.checkpointing = true;
    try {
      const { size, latest } = await this.driver.read(async (tx) => ({
        size: await readTreeSize(tx),
        latest: await readLatestCheckpoint(tx),
      }));
      // Another instance's checkpoint is kept too: this data directory has seen it.
      if (latest) this.witness?.keep(latest);
      const pending = size - (latest?.size ?? 0);
      if (latest && pending <= 0) return undefined;
      const elapsed_ms = latest ? this.clock().getTime() - Date.parse(latest.created_at) : Infinity;
      // Timed by this process's monotonic clock too: a checkpoint stamped by a clock that ran ahead
      // (or while Bursar's clock held still after the host's stepped back) would otherwise look
      // newer than now for as long as the clock was off, and no timed checkpoint would be cut.
      if (latest && latest.size !== this.checkpointSeen.size) this.checkpointSeen = { size: latest.size, at_ms: this.monotonicMs() };
      const seen_ms = this.monotonicMs() - this.checkpointSeen.at_ms;
      const interval_ms = this.checkpointSeconds * 1000;
      if (pending >= this.checkpointEvery || elapsed_ms >= interval_ms || seen_ms >= interval_ms) return await this.checkpoint();
      return undefined;
    } finally {
      this.checkpointing = false;
    }
  }

  /**
   * Entries [start, end), at most entries_page_max, and no more once entries_page_bytes_max of
   * entry text is reached (the first entry always comes): entries of up to 4 MiB each would make
   * a full page gigabytes. Callers learn where the page stopped from its length.
   */
  async entries(start: number, end: number): Promise<StoredEntry[]> {
    if (!Number.isSafeInteger(start) || start < 0) throw new EvidenceRangeError("start", 0, "start must be a non-negative integer");
    if (!Number.isSafeInteger(end) || end < start || end - start > entries_page_max) {
      throw new EvidenceRangeError("end", start + entries_page_max, `end must be from start to start + ${entries_page_max}`);
    }
    const rows = await this.driver.read(async (tx) => readEntryRows(tx, start, await pageEnd(tx, start, end)));
    return rows.map((row) => ({
      seq: row.seq,
      leaf_hash: row.leaf_hash,
      entry: JSON.parse(row.entry_text) as Entry,
      receipt: receiptOfRow(row, this.signer.keyIdHex, this.logId),
    }));
  }

  /** Inclusion proof of entry `index` in the tree of `size` (size <= committed size). */
  async inclusionProof(index: number, size: number): Promise<InclusionProofDocument> {
    const current = await this.syncTree();
    if (!Number.isSafeInteger(size) || size < 1 || size > current) {
      throw new EvidenceRangeError("size", current, `size must be from 1 to the tree size ${current}`);
    }
    if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
      throw new EvidenceRangeError("index", size - 1, `index must be from 0 to size - 1 (${size - 1})`);
    }
    const checkpoint = await this.driver.read((tx) => readCheckpointNote(tx, size));
    return {
      index,
      size,
      leaf_hash: this.tree.leaf(index).toString("hex"),
      root_hash: this.tree.root(size).toString("hex"),
      proof: this.tree.inclusionProof(index, size).map((hash) => hash.toString("hex")),
      checkpoint,
    };
  }

  /** Consistency proof between the trees of sizes `from` and `to` (1 <= from <= to <= committed size). */
  async consistencyProof(from: number, to: number): Promise<ConsistencyProofDocument> {
    const current = await this.syncTree();
    if (!Number.isSafeInteger(to) || to < 1 || to > current) {
      throw new EvidenceRangeError("to", current, `to must be from 1 to the tree size ${current}`);
    }
    if (!Number.isSafeInteger(from) || from < 1 || from > to) {
      throw new EvidenceRangeError("from", to, `from must be from 1 to \`to\` (${to})`);
    }
    const [from_checkpoint, to_checkpoint] = await this.driver.read(async (tx) => [
      await readCheckpointNote(tx, from),
      await readCheckpointNote(tx, to),
    ]);
    return {
      from,
      to,
      from_root: this.tree.root(from).toString("hex"),
      to_root: this.tree.root(to).toString("hex"),
      proof: this.tree.consistencyProof(from, to).map((hash) => hash.toString("hex")),
      from_checkpoint: from_checkpoint ?? null,
      to_checkpoint: to_checkpoint ?? null,
    };
  }
}
