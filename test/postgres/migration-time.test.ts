// Migrations on PostgreSQL: waiting for a lock another session holds is bounded and ends with a
// line that says so (not "cannot reach PostgreSQL"), nothing changed; the migrations' own work is
// not bounded by any statement timeout, so a large table's copy cannot stop an upgrade for good.

import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { databaseError } from "../../src/config.js";
import { migrations } from "../../src/ledger/index.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("PostgreSQL migrations and time", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    const driver = new PostgresDriver({ url: schema.url });
    await driver.migrate(migrations);
    await driver.close();
  });
  afterAll(async () => schema?.drop());

  const later = (version: number, sql: string) => [...migrations, { version, name: `test_${version}`, sqlite: sql, postgres: sql }];

  it("gives up waiting for a lock another session holds with a line that says so, and changes nothing", async () => {
    const holder = new pg.Client({ connectionString: schema!.url });
    await holder.connect();
    const driver = new PostgresDriver({ url: schema!.url, migration_lock_timeout_ms: 300 });
    try {
      // A reader in an open transaction: the migration's ALTER TABLE needs the table to itself.
      await holder.query("BEGIN");
      await holder.query("SELECT COUNT(*) FROM money_calls");
      const error = await driver.migrate(later(1_001, "ALTER TABLE money_calls ADD COLUMN test_lock INTEGER")).catch((caught: unknown) => caught);
      expect((error as { code?: unknown }).code).toBe("55P03");
      const line = (databaseError(schema!.url, error) as Error).message;
      expect(line).toContain("waited too long for a lock another session holds");
      expect(line).toContain("nothing was changed");
      expect(line).not.toContain("cannot reach");
      await holder.query("ROLLBACK");
      const version = await holder.query<{ version: number }>("SELECT MAX(version) AS version FROM schema_migrations");
      expect(version.rows[0]?.version).toBe(Math.max(...migrations.map((migration) => migration.version)));
    } finally {
      await holder.end();
      await driver.close();
    }
  });

  it("runs migrations with no statement timeout at all, whatever the connections' own", async () => {
    const driver = new PostgresDriver({ url: schema!.url, statement_timeout_ms: 200 });
    try {
      // Checked from inside a migration: no limit at all (a fixed one, however long, a big enough table would always hit).
      const unlimited = `DO $$ BEGIN IF current_setting('statement_timeout') <> '0' THEN RAISE EXCEPTION 'statement_timeout is %', current_setting('statement_timeout'); END IF; END $$`;
      expect(await driver.migrate(later(1_002, unlimited))).toEqual([1_002]);
    } finally {
      await driver.close();
    }
  });
});
