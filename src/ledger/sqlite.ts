// SQLite implementation of the storage port: better-sqlite3 in WAL mode, one connection per
// process, BEGIN IMMEDIATE per write transaction, group commit, and the WAL's fsync run on
// libuv's thread pool so a commit never blocks the event loop while the disk flushes.

import Database from "better-sqlite3";
import { chmodSync, statSync } from "node:fs";
import { bindable, DatabaseFileError, type Migration, type ReadOptions, type RunResult, type SqlDriver, type SqlTx, type SqlValue, type TransactionOptions } from "./driver.js";
import { notRegularFile } from "../file-kind.js";
import { newest_schema_version_sql, refuseNewerSchema } from "./migrations/index.js";
import { Permits } from "./permits.js";
import { Checkpointer, WalSync, type WalFlush, type Waiter } from "./sqlite-wal.js";

export type { WalFlush } from "./sqlite-wal.js";

/**
 * How long one attempt to take a lock held by another connection (another process: a CLI
 * command, a backup, a stuck tool) may wait. better-sqlite3 waits on the event loop's own
 * thread, so this is how long a held lock may stall every request, every proxied observer
 * stream and /healthz at a time; the patience is in the retries, which wait off the thread.
 */
export const sqlite_busy_timeout_ms = 20;
/** BEGIN is retried this many times after the busy timeout already waited: with the backoff
 *  below, about 15 s in all before a transaction fails for a lock another connection holds. */
export const sqlite_begin_attempts_max = 200;
/** The checkpoint worker's connection waits on its own thread: it may wait long. */
const checkpoint_busy_timeout_ms = 5_000;

export interface SqliteOptions {
  /** A file path or ":memory:". */
  path: string;
  readonly?: boolean;
  /** Replaces the WAL flush (tests use it to hold a flush open or make it fail). */
  flush?: WalFlush;
  /** WAL frames past which the WAL is started over (see wal_restart_frames_default). */
  wal_restart_frames?: number;
}

/** Group commit: transactions that queue up behind one another, or start in the same turn of
 *  the event loop, share one COMMIT (one fsync), but no more than this many, and a group older
 *  than this is committed as soon as a member leaves it. */
export const group_commit_transactions_max = 64;
export const group_commit_open_ms_max = 20;

/** A member of the open group: async_commit members resolve at COMMIT, the rest after the flush. */
type GroupMember = Waiter & { async_commit: boolean };

function isBusy(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_BUSY_SNAPSHOT" || code === "SQLITE_LOCKED";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The database holds agent-token hashes, sealed secrets and every payment: mode 0600 like the
 * data directory's other secrets. Only a file this process owns is changed (chmod would fail on
 * another user's file, and that file's mode is its owner's choice); a missing one is skipped.
 */
function ownerOnly(path: string): void {
  let stat;
  try {
    stat = statSync(path);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return;
    throw error;
  }
  if ((stat.mode & 0o077) === 0 || stat.uid !== process.getuid?.()) return;
  try {
    chmodSync(path, stat.mode & 0o700);
  } catch (error) {
    throw new DatabaseFileError(`cannot make it private to its owner (${(error as Error).message}); SQLite keeps a database in a regular file of its own`);
  }
}

/**
 * Refuses a path that names something other than a regular file (through symbolic links), before
 * it is opened: SQLite "opened" /dev/null, its mode was then made owner-only (for every user of
 * the machine) and a /dev/null-journal made beside it; a FIFO's open waits for a writer.
 */
function refuseNotRegularFile(path: string): void {
  const kind = notRegularFile(path);
  if (kind) throw new DatabaseFileError(`${kind}, not a regular file; SQLite keeps a database in a regular file: point it at one (a new path is created)`);
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = "sqlite" as const;
  readonly db: Database.Database;
  /** Serializes async transactions on one connection: SQLite has one writer, and an open
   *  transaction on a shared connection must not see another request's statements. */
  private readonly mutex = new Permits();
  private readonly statements = new Map<string, Database.Statement>();
  private readonly tx: SqlTx;
  private readonly wal: WalSync;
  /** Present for a WAL file: checkpoints run on a worker thread. */
  readonly checkpointer: Checkpointer | undefined;

  constructor(options: SqliteOptions) {
    if (options.path !== ":memory:" && options.path !== "") refuseNotRegularFile(options.path);
    this.db = new Database(options.path, { readonly: options.readonly ?? false });
    this.db.pragma(`busy_timeout = ${sqlite_busy_timeout_ms}`);
    const file = options.path !== ":memory:" && options.path !== "" && !options.readonly;
    if (file) this.privateWal();
    // NORMAL: COMMIT writes the WAL without fsync; WalSync flushes it off the event loop before
    // any caller hears of the commit. A database that is not a WAL file keeps FULL.
    const wal = file && String(this.db.pragma("journal_mode", { simple: true })).toLowerCase() === "wal";
    this.db.pragma(`synchronous = ${wal ? "NORMAL" : "FULL"}`);
    this.wal = new WalSync(wal ? `${this.db.name}-wal` : null, options.flush, (error) => this.reportFailure(error));
    this.checkpointer = wal ? new Checkpointer(this.db, this.db.name, checkpoint_busy_timeout_ms, options.wal_restart_frames) : undefined;
    this.db.pragma("foreign_keys = ON");
    // Savepoint and statement journals stay in memory: with temp files, a group's savepoint
    // journal spilled into a fresh /var/tmp file (open, unlink, writes) every few transactions.
    // They only ever roll back the open transaction; the WAL alone carries durability.
    this.db.pragma("temp_store = MEMORY");
    this.db.defaultSafeIntegers(false);
    this.tx = this.makeTx();
  }

  /**
   * Makes the file owner-only, then a WAL file, its -wal and -shm owner-only too (SQLite creates
   * them with the database file's mode). A file that is not a database is refused (SQLITE_NOTADB)
   * before its mode is changed. On a refusal the connection is closed, not left open.
   */
  private privateWal(): void {
    try {
      this.db.pragma("user_version");
      ownerOnly(this.db.name);
      this.db.pragma("journal_mode = WAL");
      for (const suffix of ["-wal", "-shm"]) ownerOnly(`${this.db.name}${suffix}`);
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** A transaction's statements; a write transaction gets its own, so runWithCommit can end it. */
  private makeTx(): SqlTx {
    let ended = false;
    const statement = (sql: string) => {
      if (ended) throw new Error("nothing runs in a transaction after its runWithCommit statement");
      return this.statement(sql);
    };
    return {
      dialect: "sqlite",
      forUpdate: "",
      forNoKeyUpdate: "",
      forShare: "",
      get: async <Row>(sql: string, params?: readonly SqlValue[]) => statement(sql).get(...bindable(params)) as Row | undefined,
      all: async <Row>(sql: string, params?: readonly SqlValue[]) => statement(sql).all(...bindable(params)) as Row[],
      run: async (sql: string, params?: readonly SqlValue[]): Promise<RunResult> => {
        const info = statement(sql).run(...bindable(params));
        return { changes: info.changes };
      },
      // SQLite has no round trips to save: the statement runs now, and ends what may run.
      runWithCommit: (sql: string, params?: readonly SqlValue[]) => {
        statement(sql).run(...bindable(params));
        ended = true;
      },
    };
  }

  /** BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails mid-way
   *  on a lock upgrade; contention beyond the busy timeout is retried with backoff. */
  private async begin(mode: "IMMEDIATE" | "DEFERRED"): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        this.db.exec(`BEGIN ${mode}`);
        return;
      } catch (error) {
        if (!isBusy(error) || attempt >= sqlite_begin_attempts_max) throw error;
        await sleep(Math.min(50, attempt * 5) + Math.random() * 10);
      }
    }
  }

  /**
   * Runs `work` as a SAVEPOINT inside the open group transaction, or opens the group with BEGIN
   * IMMEDIATE when none is open. A failed `work` rolls back its own writes alone: to its
   * savepoint, or, for the transaction that opened the group (nothing else is in it yet, and the
   * lock keeps everyone out until `work` ends), the whole transaction, so it needs no savepoint.
   * The caller resolves only after the group's COMMIT, so a result is never reported before it
   * is durable; transactions queued meanwhile share that one fsync.
   */
  async transaction<T>(work: (tx: SqlTx) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    this.assertHealthy();
    const release = await this.mutex.take();
    let durable: Promise<void> | undefined;
    let result!: T;
    try {
      this.assertHealthy();
      const opens_group = !this.db.inTransaction;
      if (opens_group) {
        if (this.group.length !== 0) throw new Error("a group has members but no open transaction");
        await this.openGroup();
      } else {
        this.db.exec("SAVEPOINT bursar_tx");
      }
      try {
        result = await work(this.makeTx());
      } catch (error) {
        if (opens_group) this.undoGroup();
        else this.undoSavepoint(error);
        throw error;
      }
      if (!opens_group) this.db.exec("RELEASE bursar_tx");
      const async_commit = options.async_commit ?? false;
      durable = new Promise<void>((resolve, reject) => this.group.push({ resolve, reject, async_commit }));
    } finally {
      this.leave(release);
    }
    await durable;
    return result;
  }

  /**
   * A read-only snapshot: inside the open group (seeing its pending writes, as a reader of a
   * group-committing database does) or in its own deferred transaction. A read inside the group
   * joins it as a member: it is answered once the group's COMMIT is durable, and fails with the
   * group, so it never reports writes that a failed COMMIT or a later member's error rolled back.
   * An `unreported` read answers at once in either case (see ReadOptions).
   */
  async read<T>(work: (tx: SqlTx) => Promise<T>, options: ReadOptions = {}): Promise<T> {
    this.assertHealthy();
    const release = await this.mutex.take();
    let durable: Promise<void> | undefined;
    let result: T;
    try {
      if (this.db.inTransaction) {
        result = await work(this.tx);
        if (!options.unreported) durable = new Promise<void>((resolve, reject) => this.group.push({ resolve, reject, async_commit: false }));
      } else {
        // What this read sees is reported only once it is durable (unless unreported): the commits made so far.
        const seen = this.wal.last;
        await this.begin("DEFERRED");
        try {
          result = await work(this.tx);
        } finally {
          if (this.db.inTransaction) this.db.exec("COMMIT");
        }
        if (!options.unreported) durable = this.wal.durable(seen);
      }
    } finally {
      this.leave(release);
    }
    await durable;
    return result;
  }

  private failure_listeners: Array<(error: unknown) => void> = [];
  private failure_reported = false;

  onFailure(listener: (error: unknown) => void): void {
    this.failure_listeners.push(listener);
  }

  /** Tells the listeners, once, that the driver now refuses all work (a failed COMMIT or flush). */
  private reportFailure(error: unknown): void {
    if (this.failure_reported) return;
    this.failure_reported = true;
    // After the failing call has unwound: a listener may stop the server.
    queueMicrotask(() => {
      for (const listener of this.failure_listeners) listener(error);
    });
  }

  private group: GroupMember[] = [];
  private group_opened_at = 0;
  private commit_scheduled = false;
  private failure: unknown;

  private assertHealthy(): void {
    const failure = this.failure ?? this.wal.failure;
    if (failure !== undefined) {
      throw new Error(`the database failed to commit earlier and refuses further work until restarted: ${String(failure)}`);
    }
  }

  private async openGroup(): Promise<void> {
    await this.begin("IMMEDIATE");
    this.group_opened_at = performance.now();
  }

  /** The group holds only the failed transaction's writes: all of it rolls back (unless SQLite did already). */
  private undoGroup(): void {
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
  }

  private undoSavepoint(error: unknown): void {
    if (this.db.inTransaction) {
      this.db.exec("ROLLBACK TO bursar_tx");
      this.db.exec("RELEASE bursar_tx");
      return;
    }
    // SQLite rolled the whole group back (e.g. SQLITE_FULL): the group's writes are gone too,
    // so its callers fail with this error; the database itself is consistent.
    this.failGroup(error, false);
  }

  /**
   * Releases the lock. A full or old group is committed now. Otherwise the last one out leaves
   * the group open until the event loop's current turn ends (setImmediate): SQLite statements
   * answer at once, so a transaction rarely holds the lock while another arrives, and without
   * that, concurrent requests handled in one turn would each pay a COMMIT and a flush (at 16
   * concurrent create_order calls, 2 COMMITs a call before, one per 4–5 transactions after).
   */
  private leave(release: () => void): void {
    try {
      if (!this.db.inTransaction) return;
      const full = this.group.length >= group_commit_transactions_max;
      const old = performance.now() - this.group_opened_at >= group_commit_open_ms_max;
      if (full || old) this.commitGroup();
      else if (this.mutex.waiting === 0) this.scheduleCommit();
    } finally {
      release();
    }
  }

  /** Commits the open group after the I/O callbacks of this turn have run; queued like any caller. */
  private scheduleCommit(): void {
    if (this.commit_scheduled) return;
    this.commit_scheduled = true;
    setImmediate(() => {
      this.mutex
        .run(async () => {
          this.commit_scheduled = false;
          if (this.db.open && this.db.inTransaction) this.commitGroup();
        })
        // commitGroup reports its failures to the group; anything else poisons the driver.
        .catch((error: unknown) => this.failGroup(error, true));
    });
  }

  /**
   * COMMIT writes the group's WAL frames; its members resolve once WalSync has flushed them
   * (async_commit members at once, their frames by the next flush or WalSync.later's own). It
   * never throws: whatever fails, every member hears of it and the lock is released.
   */
  private commitGroup(): void {
    const waiters = this.group;
    this.group = [];
    try {
      this.db.exec("COMMIT");
    } catch (error) {
      try {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
      } catch {
        // The failed COMMIT already poisons the driver; a failed ROLLBACK adds nothing to report.
      }
      this.group = waiters;
      this.failGroup(error, true);
      return;
    }
    const commit = this.wal.commit();
    try {
      this.checkpointer?.committed();
    } catch {
      // Housekeeping only: the commit stands, and the WAL is checkpointed again on a later commit.
    }
    const flushed = waiters.filter((waiter) => !waiter.async_commit);
    for (const waiter of waiters) if (waiter.async_commit) waiter.resolve();
    if (flushed.length === 0) {
      // Nobody waits: the next call's flush usually covers it, so it costs no flush of its own.
      this.wal.later(commit);
      return;
    }
    this.wal.durable(commit).then(
      () => flushed.forEach((waiter) => waiter.resolve()),
      (error: unknown) => flushed.forEach((waiter) => waiter.reject(error)),
    );
  }

  private failGroup(error: unknown, poison: boolean): void {
    // A COMMIT that failed leaves the process unsure what is durable (and its caches, such
    // as the evidence tree, may have seen the lost rows): stop taking work until restarted.
    if (poison) {
      if (this.failure === undefined) this.reportFailure(error);
      this.failure = error;
    }
    const waiters = this.group;
    this.group = [];
    for (const waiter of waiters) waiter.reject(error);
  }

  async migrate(migrations: readonly Migration[]): Promise<number[]> {
    const release = await this.mutex.take();
    try {
      // Migrations run before any write; should a group still be open, it is committed first.
      if (this.db.inTransaction) this.commitGroup();
      this.db.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
      );
      const newest = this.db.prepare(newest_schema_version_sql).get() as { version: number | null };
      refuseNewerSchema(newest.version, migrations);
      const applied: number[] = [];
      for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
        await this.begin("IMMEDIATE");
        try {
          const done = this.db.prepare("SELECT 1 FROM schema_migrations WHERE version = ?").get(migration.version);
          if (!done) {
            this.db.exec(migration.sqlite);
            this.db
              .prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)")
              .run(migration.version, migration.name, new Date().toISOString());
            applied.push(migration.version);
          }
          this.db.exec("COMMIT");
        } catch (error) {
          if (this.db.inTransaction) this.db.exec("ROLLBACK");
          throw error;
        }
      }
      this.statements.clear();
      // Applied migrations are made durable before anything runs on them (none applied: no write).
      if (applied.length > 0) {
        this.wal.commit();
        this.wal.flushNow();
      }
      return applied;
    } finally {
      release();
    }
  }

  async close(): Promise<void> {
    const release = await this.mutex.take();
    try {
      // A group left open (its last member queued behind this close, or its commit scheduled)
      // is committed and flushed first.
      if (this.db.open && this.db.inTransaction) this.commitGroup();
      await this.wal.durable(this.wal.last).catch(() => undefined);
      this.wal.close();
      await this.checkpointer?.close();
      if (this.db.open) this.db.close();
    } finally {
      release();
    }
  }
}
