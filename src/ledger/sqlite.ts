// SQLite implementation of the storage port: better-sqlite3 in WAL mode with
// synchronous=FULL, one connection per process, BEGIN IMMEDIATE per write transaction.

import Database from "better-sqlite3";
import type { Migration, RunResult, SqlDriver, SqlTx, SqlValue } from "./driver.js";

export const sqlite_busy_timeout_ms = 5_000;
/** BEGIN IMMEDIATE is retried this many times after the busy timeout already waited. */
export const sqlite_begin_attempts_max = 20;

export interface SqliteOptions {
  /** A file path or ":memory:". */
  path: string;
  readonly?: boolean;
}

/** Serializes async transactions on one connection: SQLite has one writer, and an open
 *  transaction on a shared connection must not see another request's statements. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  async lock(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    const previous = this.tail;
    this.tail = previous.then(() => next);
    await previous;
    return release;
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_BUSY_SNAPSHOT" || code === "SQLITE_LOCKED";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = "sqlite" as const;
  readonly db: Database.Database;
  private readonly mutex = new Mutex();
  private readonly statements = new Map<string, Database.Statement>();
  private readonly tx: SqlTx;

  constructor(options: SqliteOptions) {
    this.db = new Database(options.path, { readonly: options.readonly ?? false });
    this.db.pragma(`busy_timeout = ${sqlite_busy_timeout_ms}`);
    if (options.path !== ":memory:" && !options.readonly) this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = FULL");
    this.db.pragma("foreign_keys = ON");
    this.db.defaultSafeIntegers(false);
    this.tx = this.makeTx();
  }

  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  private makeTx(): SqlTx {
    const normalize = (params: readonly SqlValue[] | undefined) =>
      (params ?? []).map((value) => (typeof value === "boolean" ? Number(value) : value));
    return {
      dialect: "sqlite",
      forUpdate: "",
      get: async <Row>(sql: string, params?: readonly SqlValue[]) =>
        this.statement(sql).get(...normalize(params)) as Row | undefined,
      all: async <Row>(sql: string, params?: readonly SqlValue[]) =>
        this.statement(sql).all(...normalize(params)) as Row[],
      run: async (sql: string, params?: readonly SqlValue[]): Promise<RunResult> => {
        const info = this.statement(sql).run(...normalize(params));
        return { changes: info.changes };
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

  async transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.inTransaction("IMMEDIATE", work);
  }

  async read<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.inTransaction("DEFERRED", work);
  }

  private async inTransaction<T>(mode: "IMMEDIATE" | "DEFERRED", work: (tx: SqlTx) => Promise<T>): Promise<T> {
    const release = await this.mutex.lock();
    try {
      await this.begin(mode);
      let result: T;
      try {
        result = await work(this.tx);
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw error;
      }
      this.commit();
      return result;
    } finally {
      release();
    }
  }

  private commit(): void {
    // COMMIT can itself meet SQLITE_BUSY in WAL mode only for checkpoints; busy_timeout covers it.
    try {
      this.db.exec("COMMIT");
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      throw error;
    }
  }

  async migrate(migrations: readonly Migration[]): Promise<number[]> {
    const release = await this.mutex.lock();
    try {
      this.db.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
      );
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
      return applied;
    } finally {
      release();
    }
  }

  async close(): Promise<void> {
    const release = await this.mutex.lock();
    try {
      if (this.db.open) this.db.close();
    } finally {
      release();
    }
  }
}
