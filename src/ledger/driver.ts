// The storage port under the ledger and the evidence log: one small SQL interface
// with a SQLite and (later) a PostgreSQL implementation, so the money logic is written once.

/** A parameter bound into a statement. Booleans are stored as 0/1. */
export type SqlValue = string | number | bigint | null | Uint8Array;

/** Parameters as both drivers bind them: a boolean that slipped past the type as 0/1, the rest as they are. */
export function bindable(params: readonly SqlValue[] | undefined): unknown[] {
  return (params ?? []).map((value) => (typeof value === "boolean" ? Number(value) : value));
}

export interface RunResult {
  changes: number;
}

/** Statements inside one open transaction. SQL uses `?` placeholders in both dialects. */
export interface SqlTx {
  readonly dialect: Dialect;
  get<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined>;
  all<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
  run(sql: string, params?: readonly SqlValue[]): Promise<RunResult>;
  /**
   * Runs `sql` as the transaction's last statement, together with its COMMIT: on PostgreSQL both
   * go in one round trip, so locks the transaction holds are released a round trip sooner (the
   * log's sequence lock, above all). Nothing may run after it; its error fails the transaction
   * when it commits. Parameters are strings, safe integers, bigints or null.
   */
  runWithCommit(sql: string, params?: readonly SqlValue[]): void;
  /** `FOR UPDATE` where the dialect has row locks; empty on SQLite (its writer lock is the whole file). */
  readonly forUpdate: string;
  /**
   * `FOR NO KEY UPDATE` on PostgreSQL, empty on SQLite: a row lock for changes that leave the key
   * alone, which does not block the foreign-key checks (FOR KEY SHARE) of rows that reference
   * it. A transaction holding the log's sequence lock may make such checks, so a row another
   * transaction locks before it appends evidence must be locked this way, or the two deadlock.
   */
  readonly forNoKeyUpdate: string;
  /**
   * `FOR SHARE` on PostgreSQL, empty on SQLite: a row read that waits for a change to the row in
   * flight (FOR NO KEY UPDATE) to commit, and then reads what it wrote.
   */
  readonly forShare: string;
}

export type Dialect = "sqlite" | "postgres";

export interface TransactionOptions {
  /**
   * Resolve once the transaction has committed, without waiting for the flush that makes it
   * durable (it rides on the next one). Atomicity and isolation are unchanged and a killed
   * process loses nothing; only a power failure right after can undo it. For writes whose loss
   * is recovered by design — the second phase of a money call, whose in-flight lease then
   * expires to outcome-unknown for reconciliation — never for anything a caller must rely on.
   */
  async_commit?: boolean;
}

export interface ReadOptions {
  /**
   * What the read sees is never reported to anyone; it only steers what the caller does next
   * (whether to ask the provider, say). It answers at once instead of waiting, as every other
   * read does, until the writes it saw are durable.
   */
  unreported?: boolean;
}

export interface SqlDriver {
  readonly dialect: Dialect;
  /**
   * Runs `work` in one write transaction: committed when it resolves, rolled back when it
   * throws, and durable by then unless `options.async_commit`. Transient contention
   * (SQLITE_BUSY, serialization failures) is retried a bounded number of times, so `work`
   * must not have effects outside the transaction.
   */
  transaction<T>(work: (tx: SqlTx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** A read-only snapshot; never blocks writers for long. */
  read<T>(work: (tx: SqlTx) => Promise<T>, options?: ReadOptions): Promise<T>;
  /**
   * Applies the migrations not yet recorded in `schema_migrations`, in version order. Throws
   * SchemaNewerError, applying nothing, when the database records a version past both
   * `migrations` and every migration this code has (`schema_version_latest`).
   */
  migrate(migrations: readonly Migration[]): Promise<number[]>;
  close(): Promise<void>;
  /**
   * SQLite only: `listener` hears, once, of the failed COMMIT or WAL flush after which the driver
   * refuses all work until the process restarts (what is durable is then unknown to it).
   */
  onFailure?(listener: (error: unknown) => void): void;
}

/**
 * The database records a schema version newer than any this code has a migration for: a newer
 * Bursar migrated it. This code's statements were not written for that schema, so it is not
 * opened. `databaseError` (src/config.ts) reports it as one line naming BURSAR_DB.
 */
export class SchemaNewerError extends Error {
  override name = "SchemaNewerError";
  constructor(
    readonly database_version: number,
    readonly known_version: number,
  ) {
    super(`the database's schema is at version ${database_version}, newer than this code knows (version ${known_version})`);
  }
}

/** A SQLite database path that names something other than a regular file (a device, a FIFO, a
 *  directory), or one whose mode cannot be made owner-only: refused before it is opened. */
export class DatabaseFileError extends Error {
  override name = "DatabaseFileError";
}

/** Thrown when the connection broke while COMMIT was in flight (PostgreSQL): the transaction may
 *  or may not have committed, so it is never retried (retrying could apply a decision twice). */
export class CommitOutcomeUnknownError extends Error {
  override name = "CommitOutcomeUnknownError";
  readonly code = "commit_outcome_unknown";
}

/** A PostgreSQL connection whose search_path names no schema that exists: nothing can be created. */
export class NoSchemaError extends Error {
  override name = "NoSchemaError";
  constructor() {
    super("the search_path names no existing schema; create it first (CREATE SCHEMA …), or name one that exists");
  }
}

/** A schema step, written once per dialect with the same meaning. */
export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}
