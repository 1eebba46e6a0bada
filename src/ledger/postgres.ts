// PostgreSQL implementation of the storage port: a bounded pg.Pool, READ COMMITTED write
// transactions whose correctness comes from row locks (the block row, then log_head), bounded
// retry of transient failures, migrations under an advisory lock, and the database's clock.

import pg from "pg";
import { monotonicClock, type Clock } from "../clock.js";
import { bindable, CommitOutcomeUnknownError, NoSchemaError, type Migration, type RunResult, type SqlDriver, type SqlTx, type SqlValue } from "./driver.js";
import { newest_schema_version_sql, refuseNewerSchema } from "./migrations/index.js";
import { Permits } from "./permits.js";

export const pg_pool_connections_max = 10;
/**
 * Write transactions in flight per process (reads are not limited). Every write appends to the
 * evidence log, so all of them queue on its one sequence lock; more than two per process only
 * lengthen that queue and the time each holder waits for a core (bench:pg, 4 processes over 100
 * blocks on 2 cores: up to 10 in flight 58–85 decisions/s, 2 in flight 165–178).
 */
export const pg_write_transactions_max = 2;
export const pg_connect_timeout_ms = 5_000;
export const pg_statement_timeout_ms = 15_000;
/**
 * A session stuck inside a transaction (a wedged process) gives its row locks back after this:
 * below the statement timeout, so that another instance's statement waiting on those locks (the
 * log's sequence lock, which every write takes) is let through before it would be cancelled
 * (57014, not retried: it would fail the call). Bursar's own transactions never wait between
 * statements on anything but the event loop.
 */
export const pg_idle_in_transaction_timeout_ms = 10_000;
/** Attempts per transaction for serialization failures and deadlocks. */
export const pg_transaction_attempts_max = 8;
export const pg_retry_backoff_ms_max = 200;
/**
 * A transaction whose connection was lost (before its COMMIT was sent) is tried again for this
 * long: a database restart or failover takes seconds, and a write failing then fails a money
 * call's second phase after the provider has already answered (its hold stays; the lease
 * expires it to outcome-unknown). Write permits are held meanwhile, so writes queue, not pile up.
 */
export const pg_reconnect_budget_ms = 10_000;
export const pg_reconnect_backoff_ms_max = 1_000;
/**
 * A statement whose answer has not arrived after this long fails on the client: a connection
 * whose server vanished without a FIN or RST (a host that died, a failover that dropped packets)
 * would otherwise wait for TCP to give up, about 15 minutes, holding a write permit. Above
 * statement_timeout, so a live server always answers first; TCP keepalives probe idle ones.
 */
export const pg_query_timeout_ms = pg_statement_timeout_ms + 5_000;
export const pg_keepalive_idle_ms = 10_000;
/**
 * Migrations wait this long for a lock (another process's migration, or a table another session
 * is using) before giving up, with nothing changed. Their own work has no time limit: copying a
 * large table (migration 010 copies money_calls, 3M rows in 22 s, measured) may take longer
 * than any fixed bound, and a bound it always hit would stop the upgrade for good.
 */
export const pg_migration_lock_timeout_ms = 120_000;
/** Round trips per clock measurement; the one with the shortest round trip wins (as NTP does). */
export const pg_clock_samples = 5;
export const pg_clock_resync_ms = 30_000;
/** Translated statements kept; our SQL is a small fixed set plus multi-row inserts of 1..50 rows. */
const translated_statements_max = 2_000;
/**
 * SQLSTATE 0A000 raised by RevalidateCachedQuery ("cached plan must not change result type"): a
 * prepared `SELECT *` whose table gained or lost a column (another process ran a migration).
 * The statement fails on every execution until re-prepared. The routine names it whatever the
 * server's lc_messages language; the English message is the fallback.
 */
const stale_plan_routine = "RevalidateCachedQuery";
const stale_plan_message = "cached plan must not change result type";

const int8_oid = 20;
const numeric_oid = 1700;

export interface PostgresOptions {
  /** postgres://user@host:port/db; `?options=-c search_path=…` selects a schema. */
  url: string;
  pool_connections_max?: number;
  write_transactions_max?: number;
  /**
   * Run statements as named prepared statements (default true): parsed and planned once per
   * connection. false sends each unnamed, parsed on every execution: for a connection pooler
   * that cannot keep prepared statements (PgBouncer before 1.21 in transaction mode), and for
   * bench:pg's side-by-side comparison.
   */
  prepared_statements?: boolean;
  /** Tests shorten these (defaults pg_query_timeout_ms, pg_reconnect_budget_ms,
   *  pg_statement_timeout_ms, pg_idle_in_transaction_timeout_ms). */
  query_timeout_ms?: number;
  reconnect_budget_ms?: number;
  statement_timeout_ms?: number;
  idle_in_transaction_timeout_ms?: number;
  /** Default pg_migration_lock_timeout_ms. */
  migration_lock_timeout_ms?: number;
}

/** BIGINT (amounts, milliseconds, COUNT) and integer NUMERIC (SUM) become exact JS numbers. */
function parseSafeInteger(text: string): number {
  const value = Number(text);
  if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(value)) {
    throw new RangeError(`PostgreSQL returned ${text}, which is not a safe integer; Bursar stores only integers below 2^53`);
  }
  return value;
}

const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === int8_oid || oid === numeric_oid) return parseSafeInteger;
    return pg.types.getTypeParser(oid, format ?? "text");
  },
};

interface Translated {
  text: string;
  placeholders: number;
}

/** A translated statement and the name it is prepared under on every connection that runs it. */
interface Prepared extends Translated {
  name: string;
}

/**
 * Rewrites `?` placeholders to `$1..$n`. Our statements never put `?` inside a string literal or
 * quoted identifier, never use `$` or comments: each of those is refused rather than guessed at.
 */
export function toPositional(sql: string): Translated {
  if (sql.includes("$")) throw new Error(`SQL for the port must not contain '$': ${sql}`);
  if (sql.includes("--") || sql.includes("/*")) throw new Error(`SQL for the port must not contain comments: ${sql}`);
  let text = "";
  let placeholders = 0;
  let quote: "'" | '"' | null = null;
  for (const char of sql) {
    if (quote) {
      if (char === "?") throw new Error(`'?' inside a quoted literal or identifier is ambiguous: ${sql}`);
      if (char === quote) quote = null; // a doubled quote closes and reopens: still correct
      text += char;
    } else if (char === "'" || char === '"') {
      quote = char;
      text += char;
    } else if (char === "?") {
      text += `$${++placeholders}`;
    } else {
      text += char;
    }
  }
  if (quote) throw new Error(`unterminated quote in SQL: ${sql}`);
  return { text, placeholders };
}

/**
 * A string as an SQL literal, exactly as node-postgres's escapeLiteral writes it: quotes doubled,
 * and with any backslash the ` E'…'` form with backslashes doubled, so it reads the same with
 * standard_conforming_strings on or off. The driver's loop appends one character at a time; an
 * evidence entry is a kilobyte of text, and replaceAll is over ten times faster on it.
 */
export function quoteLiteral(text: string): string {
  const quoted = text.replaceAll("'", "''");
  return text.includes("\\") ? ` E'${quoted.replaceAll("\\", "\\\\")}'` : `'${quoted}'`;
}

/**
 * A statement in toPositional's form with each `$n` replaced by parameter n as an SQL literal,
 * for the simple query protocol (which takes several statements in one message but no
 * parameters). toPositional refused any other `$`, so every `$n` is a placeholder. Strings are
 * quoted by quoteLiteral. Integers are bracketed, so a negative one after a minus
 * sign cannot start a `--` comment; a fractional number is refused (a BIGINT column would round
 * its literal where it refuses the bound value), and so is anything else.
 */
export function withLiterals(positional: string, params: readonly unknown[]): string {
  return positional.replace(/\$(\d+)/g, (_, number: string) => {
    const value = params[Number(number) - 1];
    if (value === null) return "NULL";
    if (typeof value === "string") return quoteLiteral(value);
    if (typeof value === "bigint" || Number.isSafeInteger(value)) return `(${String(value)})`;
    throw new Error(`parameter ${number} cannot be written as an SQL literal: ${typeof value === "number" ? value : typeof value}`);
  });
}

const connection_error_codes = new Set([
  "ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND",
  "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
  "08000", "08001", "08003", "08004", "08006", // connection_exception family
  "53300", // too_many_connections
]);
const contention_codes = new Set(["40001", "40P01", "55P03"]); // serialization, deadlock, lock_not_available

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function isConnectionError(error: unknown): boolean {
  const code = codeOf(error);
  if (code && connection_error_codes.has(code)) return true;
  const message = error instanceof Error ? error.message : "";
  return /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|Query read timeout/i.test(message);
}

/**
 * Unique keys two transactions can both find free under READ COMMITTED and then both write, the
 * later waiting for the earlier's COMMIT and failing (23505). Run again, the later sees the
 * earlier's row and decides by it:
 * - money_calls_number: two transactions of one agent numbered a money call alike (a batch, which
 *   reads the agents' newest calls before their numbering lock, see recordMoneyCall, beside
 *   another transaction of the agent on another block, or on none); run again, it counts and
 *   numbers after the earlier's call.
 * - reservations_payment_id_key: two reports bound one payment to two reservations at once (the
 *   provider naming one payment on two orders, delivered to two instances; each locks only its
 *   own reservation's block); run again, the later finds the payment bound elsewhere, a conflict
 *   that freezes its block, where it answered 500 and froze nothing.
 * - reservations_order_id_key: two calls on different blocks answered with one order id at once
 *   (a provider that reuses ids; each locks only its own block); run again, the later finds the
 *   order taken and records its outcome as unknown (completeOrder, orderFound), where it failed.
 */
const racing_unique_keys: ReadonlySet<string> = new Set(["money_calls_number", "reservations_payment_id_key", "reservations_order_id_key"]);

function isUniqueKeyRace(error: unknown): boolean {
  return codeOf(error) === "23505" && racing_unique_keys.has(String((error as { constraint?: unknown }).constraint));
}

function isStalePlan(error: unknown): boolean {
  if (codeOf(error) !== "0A000" || !(error instanceof Error)) return false;
  return (error as { routine?: unknown }).routine === stale_plan_routine || error.message.includes(stale_plan_message);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

type Phase = "connect" | "work" | "commit";

class AttemptError extends Error {
  constructor(
    readonly failure: unknown,
    readonly phase: Phase,
  ) {
    super(failure instanceof Error ? failure.message : String(failure));
  }
}

/**
 * The first error each pooled client emitted, heard from its connect on by the one listener it
 * has for life. pg emits 'error' when the socket ends or resets without a PostgreSQL error
 * message first (a network failure, a failover, a proxy restart), and a server that ends a new
 * session (pg_terminate_backend) can send its FATAL in the same read as its startup answer, after
 * the pool took its idle listener off and before the client is handed over: an 'error' event
 * nobody hears ends the process.
 */
const client_errors = new WeakMap<pg.ClientBase, Error>();

function listenFromConnect(client: pg.ClientBase): void {
  client.on("error", (error: Error) => {
    if (!client_errors.has(client)) client_errors.set(client, error);
  });
}

/**
 * A client checked out of the pool. `broken` is what the driver marked (a connection error it
 * met, a ROLLBACK that failed), else the error the client emitted: a broken client is destroyed
 * on release instead of returning to the pool.
 */
class Checkout {
  private marked: Error | undefined;
  /** The client holds statements prepared under names the driver no longer uses. */
  private readonly stale: boolean;

  constructor(
    readonly client: pg.PoolClient,
    /** The driver's statement names' generation now: a client first used under an older one is not reused. */
    generation = 0,
  ) {
    const first = statement_generations.get(client);
    if (first === undefined) statement_generations.set(client, generation);
    this.stale = first !== undefined && first < generation;
  }

  get broken(): Error | undefined {
    return this.marked ?? client_errors.get(this.client);
  }

  set broken(error: Error | undefined) {
    this.marked = error;
  }

  /** Returns the client (or destroys it when broken, or holding an older generation's statements). */
  release(): void {
    this.client.release(this.broken ?? (this.stale ? stale_statements : undefined));
  }
}

/**
 * Which generation of the driver's statement names each client was first used under. Renamed
 * statements (a stale plan after another instance's migration, or the name cache full) are
 * prepared afresh on every connection, and the old ones stay prepared on the server for the
 * connection's life, which under steady load never idles out: ~60 more a connection per rename.
 * A client of an older generation is closed when released, and the pool opens a new one.
 */
const statement_generations = new WeakMap<pg.PoolClient, number>();
const stale_statements = new Error("its prepared statements have been renamed since: closed, not reused");

/** A query that fails with "Query read timeout" when its answer takes longer than `ms`
 *  (node-postgres reads query_timeout from the query config; its types leave it out). */
function timed(config: pg.QueryConfig, ms: number): pg.QueryConfig {
  return Object.assign(config, { query_timeout: ms });
}

/** The answer to `<statement>; COMMIT` must be two results, the last the COMMIT: anything else
 *  means the text did not parse as the two statements it was built to be. */
function committed(answer: pg.QueryResult | pg.QueryResult[]): void {
  const results = Array.isArray(answer) ? answer : [answer];
  if (results.length !== 2 || results[1]?.command !== "COMMIT") {
    throw new Error(`a statement sent with COMMIT answered ${results.map((result) => result.command).join(", ")} instead of it and COMMIT`);
  }
}

export class PostgresDriver implements SqlDriver {
  readonly dialect = "postgres" as const;
  readonly pool: pg.Pool;
  private readonly writers: Permits;
  private readonly translated = new Map<string, Prepared>();
  /** Statement names are never reused, so a name always stands for one text on every connection. */
  private statements_named = 0;
  /** Bumped each time the statement names are renamed (see statement_generations). */
  private statement_generation = 0;
  private readonly prepared_statements: boolean;
  private readonly query_timeout_ms: number;
  private readonly reconnect_budget_ms: number;
  private readonly migration_lock_timeout_ms: number;
  private resync: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: PostgresOptions) {
    this.prepared_statements = options.prepared_statements ?? true;
    this.query_timeout_ms = options.query_timeout_ms ?? pg_query_timeout_ms;
    this.reconnect_budget_ms = options.reconnect_budget_ms ?? pg_reconnect_budget_ms;
    this.migration_lock_timeout_ms = options.migration_lock_timeout_ms ?? pg_migration_lock_timeout_ms;
    this.writers = new Permits(options.write_transactions_max ?? pg_write_transactions_max);
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.pool_connections_max ?? pg_pool_connections_max,
      connectionTimeoutMillis: pg_connect_timeout_ms,
      idleTimeoutMillis: 30_000,
      statement_timeout: options.statement_timeout_ms ?? pg_statement_timeout_ms,
      idle_in_transaction_session_timeout: options.idle_in_transaction_timeout_ms ?? pg_idle_in_transaction_timeout_ms,
      // No lock wait of its own: statement_timeout bounds every wait, and a database's or role's
      // default (a DBA's lock_timeout = '5ms') failed hot-block calls after the provider had
      // made their orders. A string: node-postgres drops a startup setting that is a falsy 0.
      lock_timeout: "0" as unknown as number,
      application_name: "bursar",
      keepAlive: true,
      keepAliveInitialDelayMillis: pg_keepalive_idle_ms,
      types,
    });
    // An idle client whose server went away emits here; the pool drops it, the next checkout reconnects.
    this.pool.on("error", () => undefined);
    this.pool.on("connect", listenFromConnect);
  }

  /**
   * The positional form of `sql` and its statement name. Named statements are parsed and planned
   * once per connection instead of on every execution (a decision runs about 13 statements: this
   * roughly halves its time in the database); node-postgres remembers which names each connection
   * has prepared.
   */
  private translate(sql: string, params: readonly SqlValue[] | undefined): Prepared {
    let found = this.translated.get(sql);
    if (!found) {
      found = { ...toPositional(sql), name: `bursar_${++this.statements_named}` };
      if (this.translated.size >= translated_statements_max) this.renameStatements();
      this.translated.set(sql, found);
    }
    const given = params?.length ?? 0;
    if (found.placeholders !== given) throw new Error(`statement has ${found.placeholders} placeholders but ${given} parameters: ${sql}`);
    return found;
  }

  /** `last` receives the statement runWithCommit queues, with its parameters written as literals. */
  private txOn(client: pg.PoolClient, last: { sql?: string }): SqlTx {
    const query = async <Row>(sql: string, params?: readonly SqlValue[]) => {
      if (last.sql !== undefined) throw new Error("nothing runs in a transaction after its runWithCommit statement");
      const { name, text } = this.translate(sql, params);
      const values = bindable(params);
      return client.query<Row & pg.QueryResultRow>(timed(this.prepared_statements ? { name, text, values } : { text, values }, this.query_timeout_ms));
    };
    return {
      dialect: "postgres",
      forUpdate: "FOR UPDATE",
      forNoKeyUpdate: "FOR NO KEY UPDATE",
      forShare: "FOR SHARE",
      get: async <Row>(sql: string, params?: readonly SqlValue[]) => (await query<Row>(sql, params)).rows[0] as Row | undefined,
      all: async <Row>(sql: string, params?: readonly SqlValue[]) => (await query<Row>(sql, params)).rows as Row[],
      run: async (sql: string, params?: readonly SqlValue[]): Promise<RunResult> => ({ changes: (await query(sql, params)).rowCount ?? 0 }),
      runWithCommit: (sql: string, params?: readonly SqlValue[]) => {
        if (last.sql !== undefined) throw new Error("a transaction runs one statement with its COMMIT");
        last.sql = withLiterals(this.translate(sql, params).text, bindable(params));
      },
    };
  }

  /** New names for every statement: each connection prepares them again (its old ones go with it). */
  private renameStatements(): void {
    this.translated.clear();
    this.statement_generation += 1;
  }

  /** One attempt: BEGIN, work, COMMIT on one pooled connection. Errors carry the phase they hit. */
  private async attempt<T>(begin: string, work: (tx: SqlTx) => Promise<T>): Promise<T> {
    let checkout: Checkout;
    try {
      checkout = new Checkout(await this.pool.connect(), this.statement_generation);
    } catch (error) {
      throw new AttemptError(error, "connect");
    }
    // Ended by its server before it was handed over: destroyed, and the attempt made again.
    if (checkout.broken) {
      checkout.release();
      throw new AttemptError(checkout.broken, "connect");
    }
    const { client } = checkout;
    let phase: Phase = "work";
    const last: { sql?: string } = {};
    // A timed-out statement leaves its connection unusable: it is marked broken (destroyed on release).
    const control = (text: string) => client.query(timed({ text }, this.query_timeout_ms));
    try {
      await control(begin);
      const result = await work(this.txOn(client, last));
      // Broken while no statement was in flight: COMMIT would never be sent, so the server rolled
      // the transaction back and it is safe to retry. Thrown in the work phase for that reason.
      if (checkout.broken) throw checkout.broken;
      phase = "commit";
      // The simple query protocol runs both statements from one message; if the first fails,
      // the server skips the COMMIT and leaves the transaction aborted (rolled back below).
      if (last.sql === undefined) await control("COMMIT");
      else committed(await control(`${last.sql}; COMMIT`));
      return result;
    } catch (error) {
      if (isConnectionError(error)) checkout.broken ??= error as Error;
      else if ((phase === "work" || last.sql !== undefined) && !checkout.broken) {
        await control("ROLLBACK").catch((rollback: Error) => (checkout.broken = rollback));
      }
      throw new AttemptError(error, phase);
    } finally {
      checkout.release();
    }
  }

  private async withRetry<T>(begin: string, work: (tx: SqlTx) => Promise<T>, readonly: boolean): Promise<T> {
    const started_ms = performance.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(begin, work);
      } catch (error) {
        const { failure: cause, phase } = error as AttemptError;
        const connection = isConnectionError(cause);
        // A lost connection during COMMIT leaves the outcome unknown: a write is never re-run then.
        if (connection && phase === "commit" && !readonly) {
          throw new CommitOutcomeUnknownError(`the connection broke during COMMIT; the outcome is unknown: ${String((cause as Error).message)}`);
        }
        // Fresh names make every connection prepare its statements again, against the new columns.
        const stale = isStalePlan(cause);
        if (stale) this.renameStatements();
        const transient = connection || stale || contention_codes.has(codeOf(cause) ?? "") || isUniqueKeyRace(cause);
        const again = connection ? performance.now() - started_ms < this.reconnect_budget_ms : attempt < pg_transaction_attempts_max;
        if (!transient || !again || this.closed) throw cause;
        const backoff = Math.min(connection ? pg_reconnect_backoff_ms_max : pg_retry_backoff_ms_max, 5 * 2 ** attempt);
        await sleep(backoff / 2 + Math.random() * (backoff / 2));
      }
    }
  }

  /** A write transaction, after a write permit (held through retries and their backoff). */
  transaction<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.writers.run(() => this.withRetry("BEGIN ISOLATION LEVEL READ COMMITTED", work, false));
  }

  /** One consistent snapshot for reads that span several statements (the inbox, pages of entries). */
  read<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    return this.withRetry("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", work, true);
  }

  /**
   * Applies pending migrations in one transaction under a transaction-level advisory lock keyed
   * by the schema, so several processes starting at once apply each migration exactly once.
   */
  async migrate(migrations: readonly Migration[]): Promise<number[]> {
    const checkout = new Checkout(await this.pool.connect());
    const { client } = checkout;
    try {
      await client.query("BEGIN");
      // Waiting for a lock is bounded; the migrations' own statements are not (see pg_migration_lock_timeout_ms).
      await client.query(`SET LOCAL lock_timeout = ${Math.floor(this.migration_lock_timeout_ms)}`);
      await client.query("SET LOCAL statement_timeout = 0");
      const schema = await client.query<{ schema: string | null }>("SELECT current_schema() AS schema");
      const name = schema.rows[0]?.schema;
      if (!name) throw new NoSchemaError();
      await client.query("SELECT pg_advisory_xact_lock(hashtext('bursar.migrate'), hashtext($1))", [name]);
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
      );
      const newest = await client.query<{ version: number | null }>(newest_schema_version_sql);
      refuseNewerSchema(newest.rows[0]?.version, migrations);
      const applied: number[] = [];
      for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
        const done = await client.query("SELECT 1 FROM schema_migrations WHERE version = $1", [migration.version]);
        if (done.rowCount) continue;
        await client.query(migration.postgres);
        await client.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [
          migration.version,
          migration.name,
          new Date().toISOString(),
        ]);
        applied.push(migration.version);
      }
      await client.query("COMMIT");
      return applied;
    } catch (error) {
      if (!checkout.broken) await client.query("ROLLBACK").catch((rollback: Error) => (checkout.broken = rollback));
      throw error;
    } finally {
      checkout.release();
    }
  }

  /**
   * The database's time minus the local wall clock (`Date.now()`, the source the database clock
   * reads, so a wall-clock step after start is absorbed by the next measurement), from the sample
   * with the shortest round trip. A sample across a backwards step has a negative round trip and
   * is skipped.
   */
  async measureClockOffset(): Promise<{ offset_ms: number; round_trip_ms: number }> {
    let best = { offset_ms: 0, round_trip_ms: Infinity };
    for (let sample = 0; sample < pg_clock_samples; sample++) {
      const sent = Date.now();
      const result = await this.pool.query<{ ms: number }>("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms");
      const received = Date.now();
      const database_ms = Number(result.rows[0]?.ms);
      if (!Number.isFinite(database_ms)) throw new Error("PostgreSQL returned no clock reading");
      const round_trip_ms = received - sent;
      if (round_trip_ms >= 0 && round_trip_ms < best.round_trip_ms) best = { offset_ms: database_ms - (sent + received) / 2, round_trip_ms };
    }
    if (best.round_trip_ms === Infinity) throw new Error("the local clock stepped backwards during every clock sample");
    return best;
  }

  /**
   * A clock that reads the database's time: the offset between the database and the local wall
   * clock is measured now and every pg_clock_resync_ms, so every instance on this database agrees
   * on `now` to within about half a round trip, at no cost per transaction. It never runs
   * backwards within a process: after a backwards step of the wall clock it holds still until
   * the next measurement.
   */
  async databaseClock(): Promise<Clock> {
    let offset_ms = (await this.measureClockOffset()).offset_ms;
    if (this.resync) clearInterval(this.resync);
    this.resync = setInterval(() => {
      this.measureClockOffset()
        .then((measured) => (offset_ms = measured.offset_ms))
        .catch(() => undefined); // keep the last offset; the next resync tries again
    }, pg_clock_resync_ms);
    this.resync.unref();
    return monotonicClock(() => Math.round(Date.now() + offset_ms));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.resync) clearInterval(this.resync);
    await this.pool.end();
  }
}
