// The storage backends a parametrized test runs against: SQLite always, PostgreSQL when
// BURSAR_TEST_PG names a server. Each PostgreSQL database handed out is a fresh schema
// (bursar_test_<random>) reached through search_path, closed after each test and dropped after the file.

import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach } from "vitest";
import { waitUntil } from "./wait.js";

export interface Backend {
  name: "sqlite" | "postgres";
  /** A fresh, empty database for one test: ":memory:" or a postgres:// URL of a new schema. */
  db(): Promise<string>;
}

export const pg_test_url_variable = "BURSAR_TEST_PG";

/** Things to close after each test (PostgreSQL pools: max_connections is shared by everyone). */
const open_after_test: Array<{ close(): Promise<void> }> = [];

/** Registers a Bursar or driver on a test schema to be closed after the current test. */
export function closeAfterTest(resource: { close(): Promise<void> }): void {
  open_after_test.push(resource);
}

export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//.test(db);
}

/** The server URL, or a loud failure under CI; locally undefined (with a visible note) when unset. */
export function postgresServerUrl(): string | undefined {
  const url = process.env[pg_test_url_variable];
  if (url) return url;
  if (process.env.CI) throw new Error(`${pg_test_url_variable} must be set under CI: the PostgreSQL suite may not be skipped`);
  return undefined;
}

let noted = false;
function noteSkipped(): void {
  if (noted) return;
  noted = true;
  console.warn(`[backends] ${pg_test_url_variable} is unset: PostgreSQL variants skipped (set it, e.g. postgres://postgres@127.0.0.1:5432/test)`);
}

/** The URL of `server` with search_path set to `schema` (libpq's `options` parameter). */
export function schemaUrl(server: string, schema: string): string {
  const options = encodeURIComponent(`-c search_path=${schema}`);
  return `${server}${server.includes("?") ? "&" : "?"}options=${options}`;
}

/** Creates a fresh schema on the server; `drop()` removes it and everything in it. */
export async function freshSchema(server: string): Promise<{ url: string; schema: string; drop(): Promise<void> }> {
  const schema = `bursar_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: server, connectionTimeoutMillis: 5_000 });
  await admin.connect().catch((error: Error) => {
    throw new Error(`PostgreSQL at ${pg_test_url_variable} is unreachable: ${error.message}`);
  });
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  return {
    url: schemaUrl(server, schema),
    schema,
    drop: async () => {
      const client = new pg.Client({ connectionString: server, connectionTimeoutMillis: 5_000 });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * The backends to run a suite against. Call once at the top level of a test file: it registers
 * the hooks that close each test's PostgreSQL connections and drop the file's schemas.
 */
export function backends(): Backend[] {
  const list: Backend[] = [{ name: "sqlite", db: async () => ":memory:" }];
  afterEach(async () => {
    const resources = open_after_test.splice(0);
    await Promise.all(resources.map((resource) => resource.close().catch(() => undefined)));
  });
  let server: string | undefined;
  try {
    server = postgresServerUrl();
  } catch (error) {
    // Under CI without the variable: every PostgreSQL test fails with this message, none is skipped.
    list.push({ name: "postgres", db: async () => Promise.reject(error) });
    return list;
  }
  if (!server) {
    noteSkipped();
    return list;
  }
  const drops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const drop of drops.splice(0)) await drop();
  });
  const url = server;
  list.push({
    name: "postgres",
    db: async () => {
      const created = await freshSchema(url);
      drops.push(created.drop);
      return created.url;
    },
  });
  return list;
}

/**
 * For a session inside a transaction that holds a lock: returns a wait that resolves once another
 * transaction waits on this one (pg_locks), so a test makes an interleaving without any timing.
 */
export async function lockWaiter(session: pg.Client): Promise<(what: string) => Promise<void>> {
  const { rows } = await session.query<{ xid: string }>("SELECT pg_current_xact_id()::text AS xid");
  const xid = rows[0]!.xid;
  return async (what) => {
    await waitUntil(what, async () => {
      const waiting = await session.query("SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted", [xid]);
      return waiting.rowCount === 1;
    });
  };
}
