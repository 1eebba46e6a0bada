// For PostgreSQL tests where another session holds locks: a ledger on a fresh schema that
// decides in batches under a short statement timeout, counting the transactions that waited it
// out, with agents to call for and sessions of its own that hold locks until the test ends.

import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { Ledger, type AuthorizeResult } from "../../src/ledger/index.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { freshSchema } from "./backends.js";
import { manualClock } from "./clock.js";

export interface LockedLedger {
  /** The Bursar that made the schema (its operator makes agents and blocks). */
  readonly bursar: Bursar;
  /** A ledger of its own on the schema, batching decisions, under the short statement timeout. */
  readonly ledger: Ledger;
  readonly url: string;
  /** Transactions of `ledger` that failed with statement_timeout (57014) since the test began. */
  timedOut(): number;
  /** An agent with a block of its own. */
  agent(name: string): Promise<{ agent_id: string; block_id: string }>;
  /** Another session on the schema, connected, ended after the test at the latest. */
  connect(): Promise<pg.Client>;
  /** Another session, inside a transaction that has run `sql`, holding its locks until it ends (at the latest, after the test). */
  session(sql: string, params?: unknown[]): Promise<pg.Client>;
  /** A create_order of 100 INR under `key`, decided by `ledger`. */
  order(agent_id: string, key: string): Promise<AuthorizeResult>;
}

/** Call at the top of a describe: the hooks it registers set up and tear down the schema. */
export function lockedLedger(server: string | undefined, statement_timeout_ms: number): LockedLedger {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  let bursar: Bursar | undefined;
  let driver: PostgresDriver | undefined;
  let ledger: Ledger | undefined;
  let timed_out = 0;
  const holders: pg.Client[] = [];
  beforeAll(async () => {
    schema = await freshSchema(server as string);
    bursar = await createBursar({ db: schema.url, signingKey: generateSigningKeyPem(), clock: manualClock() });
    driver = new PostgresDriver({ url: schema.url, statement_timeout_ms, idle_in_transaction_timeout_ms: 400, query_timeout_ms: 5_000 });
    const transaction = driver.transaction.bind(driver);
    driver.transaction = (async (work: Parameters<typeof transaction>[0]) => {
      try {
        return await transaction(work);
      } catch (error) {
        if ((error as { code?: unknown }).code === "57014") timed_out += 1;
        throw error;
      }
    }) as typeof driver.transaction;
    ledger = new Ledger(driver, bursar.ledger.context, { batch_decisions: true });
  });
  beforeEach(() => {
    timed_out = 0;
  });
  afterEach(async () => {
    for (const holder of holders.splice(0)) await holder.end();
  });
  afterAll(async () => {
    await driver?.close();
    await bursar?.close();
    await schema?.drop();
  });
  const fixture: LockedLedger = {
    get bursar() {
      return bursar as Bursar;
    },
    get ledger() {
      return ledger as Ledger;
    },
    get url() {
      return (schema as { url: string }).url;
    },
    timedOut: () => timed_out,
    async agent(name) {
      const created = await fixture.bursar.operator.createAgent({ name });
      const block = await fixture.bursar.operator.createBlock({ agent_id: created.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
      return { agent_id: created.agent_id, block_id: block.block_id };
    },
    async connect() {
      const holder = new pg.Client({ connectionString: fixture.url, statement_timeout: 10_000 });
      holders.push(holder);
      await holder.connect();
      return holder;
    },
    async session(sql, params = []) {
      const holder = await fixture.connect();
      await holder.query("BEGIN");
      await holder.query(sql, params);
      return holder;
    },
    order: (agent_id, key) => fixture.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: key } }),
  };
  return fixture;
}
