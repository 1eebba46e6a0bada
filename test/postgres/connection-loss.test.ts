// The PostgreSQL driver when a connection is cut with no PostgreSQL error message first (a
// network failure, failover or proxy restart; a loopback proxy does it here), or ended by the
// server as soon as it is made: the process survives, a break before COMMIT is retried, a break
// during COMMIT is reported as unknown.

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "../../src/ledger/migrations/index.js";
import { CommitOutcomeUnknownError } from "../../src/ledger/driver.js";
import { pg_transaction_attempts_max, PostgresDriver } from "../../src/ledger/postgres.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { startPgProxy, type PgProxy } from "../support/pg-proxy.js";
import { waitUntil } from "../support/wait.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("PostgresDriver over a connection that is cut", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  let proxy: PgProxy;
  let driver: PostgresDriver;
  // An 'error' event nobody listens for is thrown from the socket's callback: in a server, the
  // process exits with code 1. Record such throws so each test can say none happened.
  const uncaught: unknown[] = [];
  const record = (error: unknown) => uncaught.push(error);

  beforeAll(async () => {
    process.on("uncaughtException", record);
    schema = await freshSchema(pg_server as string);
    proxy = await startPgProxy(pg_server as string);
    driver = new PostgresDriver({ url: proxy.url(schema.url), pool_connections_max: 2 });
    await driver.migrate(migrations);
  });
  afterEach(() => {
    uncaught.length = 0;
  });
  afterAll(async () => {
    await driver?.close();
    await proxy?.close();
    await schema?.drop();
    process.off("uncaughtException", record);
  });

  const settingValues = (name: string) =>
    driver.read((tx) => tx.all<{ value: string }>("SELECT value FROM settings WHERE name = ?", [name]));

  it("retries a transaction whose connection is cut while a statement is in flight, and nothing escapes", async () => {
    proxy.arm({ sql: /^SELECT 'cut during work'/, when: "before" });
    let attempts = 0;
    await driver.transaction(async (tx) => {
      attempts++;
      await tx.run("INSERT INTO settings (name, value) VALUES ('cut_work', ?)", [String(attempts)]);
      await tx.get("SELECT 'cut during work' AS marker");
    });
    expect(proxy.cut).toHaveLength(1);
    expect(attempts).toBe(2);
    expect(await settingValues("cut_work")).toEqual([{ value: "2" }]);
    expect(uncaught).toEqual([]);
  });

  it("retries a transaction whose connection is cut between statements: COMMIT was never sent", async () => {
    let attempts = 0;
    await driver.transaction(async (tx) => {
      attempts++;
      await tx.run("INSERT INTO settings (name, value) VALUES ('cut_idle', ?)", [String(attempts)]);
      if (attempts === 1) {
        proxy.cutAll();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    expect(attempts).toBe(2);
    expect(await settingValues("cut_idle")).toEqual([{ value: "2" }]);
    expect(uncaught).toEqual([]);
  });

  it("reports CommitOutcomeUnknownError, without retrying, when the connection is cut after COMMIT reached the server", async () => {
    proxy.arm({ sql: /^COMMIT$/, when: "after_reply" });
    let attempts = 0;
    const committing = driver.transaction(async (tx) => {
      attempts++;
      await tx.run("INSERT INTO settings (name, value) VALUES ('cut_commit', ?)", [String(attempts)]);
    });
    await expect(committing).rejects.toBeInstanceOf(CommitOutcomeUnknownError);
    expect(attempts).toBe(1);
    // The outcome really was unknown to the driver: the server had committed.
    expect(await settingValues("cut_commit")).toEqual([{ value: "1" }]);
    // The broken client left the pool; the next transaction runs on a fresh connection.
    await driver.transaction((tx) => tx.run("INSERT INTO settings (name, value) VALUES ('after_cut', 'x')"));
    expect(await settingValues("after_cut")).toEqual([{ value: "x" }]);
    expect(uncaught).toEqual([]);
  });

  it("survives a session ended in the same read as its startup answer (pg_terminate_backend just after connect), and makes the attempt again", async () => {
    // From a hostile review: the FATAL came after the pool took its idle listener off the new
    // client and before the checkout's was on, and the unheard 'error' event ended the process.
    const fresh = new PostgresDriver({ url: proxy.url(schema.url), pool_connections_max: 2 });
    try {
      proxy.terminateAtStartup(2);
      const terminated_before = proxy.terminated;
      let attempts = 0;
      await fresh.transaction(async (tx) => {
        attempts++;
        await tx.run("INSERT INTO settings (name, value) VALUES ('terminated_at_connect', ?)", [String(attempts)]);
      });
      expect(proxy.terminated - terminated_before).toBe(2);
      expect(attempts).toBe(1);
      expect(await settingValues("terminated_at_connect")).toEqual([{ value: "1" }]);
      expect(uncaught).toEqual([]);
    } finally {
      proxy.terminateAtStartup(0);
      await fresh.close();
    }
  });

  it("rides out a restart of a few seconds: a transaction begun while connections are refused commits once they are taken again", async () => {
    proxy.cutAll();
    proxy.refuse(true);
    const refused_before = proxy.refused;
    let attempts = 0;
    const committed = driver.transaction(async (tx) => {
      attempts++;
      await tx.run("INSERT INTO settings (name, value) VALUES ('restart', ?)", [String(attempts)]);
    });
    // More refused connections than the attempts contention gets: only a budget in time rides it out.
    const refusals = pg_transaction_attempts_max + 1;
    await waitUntil(`${refusals} refused connections`, () => proxy.refused - refused_before >= refusals, { interval_ms: 1 });
    proxy.refuse(false);
    await committed;
    expect(await settingValues("restart")).toEqual([{ value: String(attempts) }]);
    expect(uncaught).toEqual([]);
  });

  it("fails a statement on a connection gone silent (no FIN, no RST) within the query timeout, and the next transaction reconnects", async () => {
    const quick = new PostgresDriver({ url: proxy.url(schema.url), pool_connections_max: 1, query_timeout_ms: 300, reconnect_budget_ms: 1_000 });
    try {
      await quick.read((tx) => tx.get("SELECT 1 AS one"));
      proxy.silence(true);
      await expect(quick.transaction((tx) => tx.run("INSERT INTO settings (name, value) VALUES ('silent', '1')"))).rejects.toThrow(/Query read timeout|connection timeout/);
      proxy.silence(false);
      await quick.transaction((tx) => tx.run("INSERT INTO settings (name, value) VALUES ('silent', '2')"));
      expect(await settingValues("silent")).toEqual([{ value: "2" }]);
    } finally {
      proxy.silence(false);
      await quick.close();
    }
  });

  it("fails a migration whose connection is cut with the connection error, and a later migration applies", async () => {
    const other = await freshSchema(pg_server as string);
    const migrating = new PostgresDriver({ url: proxy.url(other.url), pool_connections_max: 1 });
    try {
      proxy.arm({ sql: /^SELECT current_schema\(\)/, when: "before" });
      await expect(migrating.migrate(migrations)).rejects.toThrow(/Connection terminated/);
      expect(await migrating.migrate(migrations)).toEqual(migrations.map((migration) => migration.version));
      expect(uncaught).toEqual([]);
    } finally {
      await migrating.close();
      await other.drop();
    }
  });
});
