// createBursar(): the library entry point. The server, the CLI, the tests and the eval
// harness all wire the same objects through it, so none of them needs HTTP to use Bursar.

import type { KeyObject } from "node:crypto";
import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { clock_floor_ahead_max_ms, ClockBehindLogError, monotonicClock, type Clock } from "./clock.js";
import { isPostgresUrl } from "./config.js";
import { createLogSigner, EvidenceLog, readNewestEntryTime, type CheckpointWitness } from "./evidence/index.js";
import { WorkInFlight } from "./gate/context.js";
import { Gate } from "./gate/gate.js";
import { LookupBudget, lookups_per_minute_default } from "./gate/lookups.js";
import type { GateObserver } from "./gate/observer.js";
import { randomBase62, randomIds, type IdSource } from "./ids.js";
import { checkLifetimes, Ledger, ledger_defaults, migrations, SqliteDriver, type SqlDriver } from "./ledger/index.js";
import { PostgresDriver } from "./ledger/postgres.js";
import { timedFlush } from "./ledger/sqlite-wal.js";
import { guard_table, type Guard } from "./policy/index.js";
import { embeddedSimulator, type EmbeddedSimulator } from "./provider/embedded.js";
import type { Provider } from "./provider/port.js";
import { version } from "./version.js";

export { version };

export interface BursarOptions {
  /** ":memory:", a SQLite file path, or a postgres:// URL. */
  db: string;
  /** PostgreSQL only: named prepared statements (default true); false for a pooler that cannot keep them. */
  pg_prepared_statements?: boolean;
  /** PostgreSQL only: decide concurrent create_order calls in shared transactions (default true;
   *  false decides each in its own, for bench:pg's side-by-side comparison). */
  pg_batch_decisions?: boolean;
  /** "simulator" (default): the Razorpay-compatible simulator in-process, reached through the
   *  real Razorpay client. Or any Provider, e.g. createRazorpayProvider(...). */
  provider?: "simulator" | Provider;
  clock?: Clock;
  /** Id source; a deterministic one (sequentialIds()) also makes the simulator's ids deterministic. */
  ids?: IdSource;
  /** Ed25519 private key (KeyObject or PEM text) for the evidence log; default: a fresh key. */
  signingKey?: KeyObject | string;
  origin?: string;
  /** Keeps the newest checkpoint outside the database (bursar serve: the data directory's
   *  last-checkpoint file); the start refuses a database that no longer holds it. */
  witness?: CheckpointWitness;
  checkpoint_every?: number;
  checkpoint_seconds?: number;
  /** The guard table; production always uses the full frozen table. Only the mutation harness
   *  passes another, per instance. */
  guards?: readonly Guard[];
  /** Receives decisions, provider timings and webhook outcomes (the server's /metrics). */
  observer?: GateObserver;
  lease_ms?: number;
  approval_lifetime_ms?: number;
  /** Provider look-ups (fetch_order, fetch_payment, fetch_order_payments) per agent per minute; default 60, 0: unlimited. */
  lookups_per_minute?: number;
  /** Without an injected clock: start on the host's (or database's) clock as it reads, even when
   *  the log's newest entry is more than an hour later (else refused: ClockBehindLogError). */
  clock_from_host?: boolean;
}

export interface Bursar {
  ledger: Ledger;
  gate: Gate;
  log: EvidenceLog;
  provider: Provider;
  driver: SqlDriver;
  /** The clock everything here reads: the injected one, else on PostgreSQL the database's, else the system's. */
  clock: Clock;
  /** The in-process simulator when `provider` is "simulator". */
  simulator?: EmbeddedSimulator;
  operator: Pick<Ledger, "createAgent" | "createBlock" | "revoke" | "unfreeze" | "freeze" | "getBlock" | "inbox">;
  close(): Promise<void>;
}

/** A postgres:// (or postgresql://) URL opens PostgreSQL; anything else is a SQLite path or ":memory:". */
export function openDriver(db: string, options: { pg_prepared_statements?: boolean; observer?: GateObserver } = {}): SqlDriver {
  if (isPostgresUrl(db)) return new PostgresDriver({ url: db, prepared_statements: options.pg_prepared_statements });
  const observer = options.observer;
  return new SqliteDriver({ path: db, ...(observer ? { flush: timedFlush((seconds) => observer.walFlush(seconds)) } : {}) });
}

function signingKeyOf(option: KeyObject | string | undefined): KeyObject {
  if (option === undefined) return generateKeyPairSync("ed25519").privateKey;
  return typeof option === "string" ? createPrivateKey(option) : option;
}

/**
 * The clock of a process given none. On PostgreSQL every instance reads the database's clock (see
 * docs/postgres.md), so velocity windows, expiries and leases agree across processes; on SQLite,
 * the host's. Either starts no earlier than the log's newest entry: a process started after the
 * host's clock stepped back took the earlier time as it was, and a block that an earlier process
 * had seen expire (and refused under R2) took money again. An entry more than an hour ahead is
 * refused (ClockBehindLogError) unless `from_host`, which starts on the clock as it reads.
 */
async function startingClock(driver: SqlDriver, from_host: boolean): Promise<Clock> {
  const newest_ms = await driver.read((tx) => readNewestEntryTime(tx));
  const reads = driver instanceof PostgresDriver ? await driver.databaseClock() : monotonicClock();
  const clock_ms = reads().getTime();
  if (from_host || newest_ms <= clock_ms) return reads;
  if (newest_ms - clock_ms > clock_floor_ahead_max_ms) throw new ClockBehindLogError(newest_ms, clock_ms);
  return monotonicClock(() => reads().getTime(), newest_ms);
}

function lifetimes(options: BursarOptions) {
  return {
    lease_ms: options.lease_ms ?? ledger_defaults.lease_ms,
    approval_lifetime_ms: options.approval_lifetime_ms ?? ledger_defaults.approval_lifetime_ms,
    derived_key_lifetime_ms: ledger_defaults.derived_key_lifetime_ms,
  };
}

function counterSuffixes(): () => string {
  let next = 0;
  return () => `S${String(++next).padStart(8, "0")}`;
}

export async function createBursar(options: BursarOptions): Promise<Bursar> {
  // Before anything is opened, migrated or logged.
  checkLifetimes(lifetimes(options));
  const driver = openDriver(options.db, options);
  try {
    return await assemble(driver, options);
  } catch (error) {
    // A start that fails (database unreachable, migration refused) must not leave a pool or a
    // file handle open behind it: the CLI reports one line and the process has to exit.
    await driver.close().catch(() => undefined);
    throw error;
  }
}

async function assemble(driver: SqlDriver, options: BursarOptions): Promise<Bursar> {
  await driver.migrate(migrations);
  const clock = options.clock ?? (await startingClock(driver, options.clock_from_host ?? false));
  const origin = options.origin ?? "bursar.local/log";
  const log = await EvidenceLog.open(driver, {
    signer: createLogSigner(signingKeyOf(options.signingKey), origin),
    origin,
    clock,
    version,
    ...(options.witness ? { witness: options.witness } : {}),
    ...(options.checkpoint_every ? { checkpoint_every: options.checkpoint_every } : {}),
    ...(options.checkpoint_seconds ? { checkpoint_seconds: options.checkpoint_seconds } : {}),
  });
  const ledger = new Ledger(driver, {
    clock,
    ids: options.ids ?? randomIds,
    guards: options.guards ?? guard_table,
    evidence: log,
    ...lifetimes(options),
  }, { batch_decisions: options.pg_batch_decisions ?? true });
  // The gate's work and the embedded simulator's webhooks under way: closing waits for both.
  const work = new WorkInFlight();
  let simulator: EmbeddedSimulator | undefined;
  let provider: Provider;
  if (options.provider === undefined || options.provider === "simulator") {
    simulator = await embeddedSimulator({ clock, ids: options.ids ? counterSuffixes() : () => randomBase62(14), ledger, work });
    provider = simulator.provider;
  } else {
    provider = options.provider;
  }
  // Look-ups are counted on a monotonic clock, unless a clock is injected (tests move it by hand).
  const injected = options.clock;
  const lookups = new LookupBudget(options.lookups_per_minute ?? lookups_per_minute_default, injected ? () => injected().getTime() : undefined);
  const gate = new Gate(ledger, provider, options.observer, lookups, work);
  const operator = {
    createAgent: ledger.createAgent.bind(ledger),
    createBlock: ledger.createBlock.bind(ledger),
    revoke: ledger.revoke.bind(ledger),
    unfreeze: ledger.unfreeze.bind(ledger),
    freeze: ledger.freeze.bind(ledger),
    getBlock: ledger.getBlock.bind(ledger),
    inbox: ledger.inbox.bind(ledger),
  };
  const bursar: Bursar = {
    ledger,
    gate,
    log,
    provider,
    driver,
    clock,
    operator,
    close: async () => {
      // Work under way finishes and is recorded first (the caller bounds how long it may take).
      await gate.idle();
      await simulator?.close();
      await driver.close();
    },
  };
  if (simulator) bursar.simulator = simulator;
  return bursar;
}

export { decide, guard_table, withoutGuard } from "./policy/index.js";
export { sequentialIds } from "./ids.js";
/** Scrubs a body as the log does: whoever holds an original reproduces its stored body and body_sha256. */
export { canonicalJson, scrub } from "./evidence/index.js";
/** For a writer of its own entries (docs/evidence.md, "For writers"): the log on a migrated driver, and its signer. */
export { createLogSigner, EvidenceLog } from "./evidence/index.js";
export { migrations } from "./ledger/index.js";
/** The Razorpay-compatible simulator, to mount in a Fastify app of one's own (docs/simulator.md, "Embedding"). */
export { acceptOnlyKey, createSimulator } from "./provider/simulator/index.js";
export type { Verdict, Guard, PolicyCall, PolicyState } from "./policy/index.js";
export { ClockBehindLogError } from "./clock.js";
export type { Clock } from "./clock.js";
export type { ToolResult } from "./gate/results.js";
