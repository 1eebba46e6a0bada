// createBursar(): the library entry point. The server, the CLI, the tests and the eval
// harness all wire the same objects through it, so none of them needs HTTP to use Bursar.

import { systemClock, type Clock } from "./clock.js";
import { randomIds, type IdSource } from "./ids.js";
import { Ledger, ledger_defaults, migrations, SqliteDriver, type SqlDriver } from "./ledger/index.js";
import type { EvidenceWriter } from "./ledger/index.js";
import { guard_table, type Guard } from "./policy/index.js";

export interface BursarOptions {
  /** ":memory:", a SQLite file path, or (later) a postgres:// URL. */
  db: string;
  clock?: Clock;
  ids?: IdSource;
  /** The guard table; production always uses the full frozen table. Only the mutation
   *  harness passes another, per instance. */
  guards?: readonly Guard[];
  evidence?: EvidenceWriter;
  lease_ms?: number;
  approval_lifetime_ms?: number;
}

export interface Bursar {
  ledger: Ledger;
  driver: SqlDriver;
  operator: Pick<Ledger, "createAgent" | "createBlock" | "revoke" | "unfreeze" | "freeze" | "getBlock" | "inbox">;
  close(): Promise<void>;
}

export function openDriver(db: string): SqlDriver {
  if (/^postgres(ql)?:\/\//.test(db)) throw new Error("PostgreSQL is not available yet; use a SQLite path");
  return new SqliteDriver({ path: db });
}

export async function createBursar(options: BursarOptions): Promise<Bursar> {
  const driver = openDriver(options.db);
  await driver.migrate(migrations);
  const ledger = new Ledger(driver, {
    clock: options.clock ?? systemClock,
    ids: options.ids ?? randomIds,
    guards: options.guards ?? guard_table,
    evidence: options.evidence ?? null,
    lease_ms: options.lease_ms ?? ledger_defaults.lease_ms,
    approval_lifetime_ms: options.approval_lifetime_ms ?? ledger_defaults.approval_lifetime_ms,
    derived_key_lifetime_ms: ledger_defaults.derived_key_lifetime_ms,
  });
  const operator = {
    createAgent: ledger.createAgent.bind(ledger),
    createBlock: ledger.createBlock.bind(ledger),
    revoke: ledger.revoke.bind(ledger),
    unfreeze: ledger.unfreeze.bind(ledger),
    freeze: ledger.freeze.bind(ledger),
    getBlock: ledger.getBlock.bind(ledger),
    inbox: ledger.inbox.bind(ledger),
  };
  return { ledger, driver, operator, close: () => driver.close() };
}

export { decide, guard_table, withoutGuard } from "./policy/index.js";
export type { Verdict, Guard, PolicyCall, PolicyState } from "./policy/index.js";
export type { Clock } from "./clock.js";
