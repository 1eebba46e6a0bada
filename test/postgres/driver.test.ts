// The PostgreSQL driver against a real server: placeholder translation and its refusals, exact
// integers, the schema's constraints, migrations racing under the advisory lock, bounded retry
// of deadlocks and lost connections, and the database clock.

import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { migrations } from "../../src/ledger/migrations/index.js";
import {
  PostgresDriver,
  pg_idle_in_transaction_timeout_ms,
  pg_statement_timeout_ms,
  pg_write_transactions_max,
  quoteLiteral,
  toPositional,
  withLiterals,
} from "../../src/ledger/postgres.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { signal, within } from "../support/wait.js";

const pg_server = postgresServerUrl();

describe("toPositional", () => {
  it("numbers ? placeholders in order and leaves the rest alone", () => {
    expect(toPositional("SELECT * FROM t WHERE a = ? AND b IN (?, ?) AND c = 'x'")).toEqual({
      text: "SELECT * FROM t WHERE a = $1 AND b IN ($2, $3) AND c = 'x'",
      placeholders: 3,
    });
    expect(toPositional("SELECT 'it''s' AS s, ? AS p").text).toBe("SELECT 'it''s' AS s, $1 AS p");
  });

  it("refuses ? inside a literal or quoted identifier, $, comments and unterminated quotes", () => {
    expect(() => toPositional("SELECT '?' AS q")).toThrow(/inside a quoted literal/);
    expect(() => toPositional('SELECT 1 AS "what?"')).toThrow(/inside a quoted literal/);
    expect(() => toPositional("SELECT $1")).toThrow(/\$/);
    expect(() => toPositional("SELECT 1 -- ?")).toThrow(/comments/);
    expect(() => toPositional("SELECT 'open")).toThrow(/unterminated/);
  });
});

/** Text PostgreSQL stores as it is (no NUL, well-formed UTF-16), rich in what quoting must handle. */
const literal_text = fc
  .array(fc.oneof(fc.constantFrom("'", "\\", "''", "\\'", "$1", "?", "--", "\n", " E'", "\\x00"), fc.string({ unit: "grapheme" })), { maxLength: 8 })
  .map((parts) => parts.join(""))
  .filter((text) => !text.includes("\u0000"));

/** Any UTF-16 code units, lone surrogates included (fast-check's "binary" unit never makes those). */
const code_units = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)) });

describe("quoteLiteral", () => {
  it("writes every string exactly as the driver's escapeLiteral does", () => {
    const driver_client = new pg.Client();
    const cases = ["", "\ud800'\\", "$&$'$`$$", "it's", "\\", `${"x".repeat(100_000)}'\\`];
    for (const text of cases) expect(quoteLiteral(text)).toBe(driver_client.escapeLiteral(text));
    fc.assert(
      fc.property(fc.oneof(literal_text, code_units), (text) => {
        expect(quoteLiteral(text)).toBe(driver_client.escapeLiteral(text));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("withLiterals", () => {
  it("writes each parameter as a literal: strings quoted, integers bracketed, null as it is", () => {
    const { text } = toPositional("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    const params = ["it's", 42, 9_007_199_254_740_993n, null, "5", "6", "7", "8", "9", "10", "$1"];
    expect(withLiterals(text, params)).toBe("INSERT INTO t VALUES ('it''s', (42), (9007199254740993), NULL, '5', '6', '7', '8', '9', '10', '$1')");
    // A negative integer after a minus sign must not become the start of a -- comment.
    expect(withLiterals("SELECT 10-$1", [-5])).toBe("SELECT 10-(-5)");
  });

  it("refuses what has no literal form, and a placeholder without a parameter", () => {
    expect(() => withLiterals("SELECT $1", [0.5])).toThrow(/parameter 1 cannot be written as an SQL literal: 0.5/);
    expect(() => withLiterals("SELECT $1", [Number.NaN])).toThrow(/parameter 1/);
    expect(() => withLiterals("SELECT $1", [new Uint8Array([1])])).toThrow(/parameter 1/);
    expect(() => withLiterals("SELECT $1, $2", ["a"])).toThrow(/parameter 2 cannot be written/);
  });
});

describe.skipIf(!pg_server)("PostgresDriver", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  let driver: PostgresDriver;
  /** Whole-millisecond readings (Date.now, the clock's rounding, the floor below) cost up to 2.5 ms together. */
  const ms_rounding = 3;
  const databaseNowMs = async () =>
    (await driver.read((tx) => tx.get<{ ms: number }>("SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT) AS ms")))?.ms ?? Number.NaN;
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    driver = new PostgresDriver({ url: schema.url, pool_connections_max: 4 });
  });
  afterAll(async () => {
    await driver?.close();
    await schema?.drop();
  });

  it("applies each migration exactly once when four processes migrate at the same moment", async () => {
    const racers = Array.from({ length: 4 }, () => new PostgresDriver({ url: schema.url, pool_connections_max: 1 }));
    try {
      const applied = await Promise.all(racers.map((racer) => racer.migrate(migrations)));
      expect(applied.flat().sort((a, b) => a - b)).toEqual(migrations.map((migration) => migration.version));
      expect(await driver.migrate(migrations)).toEqual([]);
    } finally {
      await Promise.all(racers.map((racer) => racer.close()));
    }
  });

  it("returns BIGINT, COUNT and integer SUM as exact numbers and refuses unsafe integers", async () => {
    const row = await driver.read((tx) =>
      tx.get<{ big: number; count: number; sum: number }>(
        "SELECT CAST(? AS BIGINT) AS big, COUNT(*) AS count, SUM(x) AS sum FROM (VALUES (CAST(1000000000000 AS BIGINT)), (CAST(1 AS BIGINT))) AS v(x)",
        [999_999_999_999],
      ),
    );
    expect(row).toEqual({ big: 999_999_999_999, count: 2, sum: 1_000_000_000_001 });
    await expect(driver.read((tx) => tx.get("SELECT CAST(? AS BIGINT) AS big", ["9007199254740993"]))).rejects.toThrow(/safe integer/);
    await expect(driver.read((tx) => tx.get("SELECT 1 AS one", [1]))).rejects.toThrow(/placeholders/);
  });

  it("enforces the balance CHECK, unique idempotency keys and unique webhook event ids", async () => {
    await driver.transaction(async (tx) => {
      await tx.run("INSERT INTO agents (agent_id, name, token_sha256, created_at_ms) VALUES ('agt_c', 'c', 'h', 0)");
      await tx.run(
        `INSERT INTO blocks (block_id, agent_id, currency, reserved, per_call_cap, approval_threshold, velocity_max_calls,
           velocity_window_seconds, created_at_ms, expires_at_ms) VALUES ('blk_c', 'agt_c', 'INR', 1000, 1000, 1000, 1, 1, 0, 1)`,
      );
    });
    await expect(driver.transaction((tx) => tx.run("UPDATE blocks SET held = 600, spent = 401 WHERE block_id = 'blk_c'"))).rejects.toMatchObject({
      code: "23514",
    });
    await expect(driver.transaction((tx) => tx.run("UPDATE blocks SET held = -1 WHERE block_id = 'blk_c'"))).rejects.toMatchObject({ code: "23514" });
    const key = "INSERT INTO idempotency_keys (agent_id, key, derived, tool, params_hash, status, first_at_ms) VALUES ('agt_c', 'k:1', 0, 't', 'p', 'stored', 0)";
    await driver.transaction((tx) => tx.run(key));
    await expect(driver.transaction((tx) => tx.run(key))).rejects.toMatchObject({ code: "23505" });
    const event = "INSERT INTO webhook_events (event_id, event, payment_id, outcome, received_at_ms) VALUES (?, 'e', NULL, 'pending', 0) ON CONFLICT (event_id) DO NOTHING";
    expect(await driver.transaction((tx) => tx.run(event, ["evt_1"]))).toEqual({ changes: 1 });
    expect(await driver.transaction((tx) => tx.run(event, ["evt_1"]))).toEqual({ changes: 0 });
  });

  it("retries a deadlock: both transactions commit, one of them on a later attempt", async () => {
    await driver.transaction(async (tx) => {
      await tx.run("INSERT INTO settings (name, value) VALUES ('a', '0'), ('b', '0')");
    });
    let attempts = 0;
    // Each transaction takes its first row's lock, then waits until the other holds its own first
    // row before asking for the second: both wait on each other, a deadlock by construction. (The
    // retry finds its signal already given.) A driver that ran the two one after the other would
    // fail the wait loudly instead of hanging.
    const locked = { a: signal(), b: signal() };
    const cross = (first: "a" | "b", second: "a" | "b") =>
      driver.transaction(async (tx) => {
        attempts++;
        await tx.run("UPDATE settings SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE name = ?", [first]);
        locked[first].resolve();
        await within(`the other transaction to lock row ${second}`, locked[second].promise);
        await tx.run("UPDATE settings SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE name = ?", [second]);
      });
    await Promise.all([cross("a", "b"), cross("b", "a")]);
    // One of the two was chosen as the deadlock victim and ran once more.
    expect(attempts).toBe(3);
    const values = await driver.read((tx) => tx.all<{ value: string }>("SELECT value FROM settings WHERE name IN ('a', 'b') ORDER BY name"));
    expect(values.map((row) => row.value)).toEqual(["2", "2"]);
  });

  it("retries a transaction whose connection is killed before COMMIT, and runs its work once in effect", async () => {
    let attempts = 0;
    await driver.transaction(async (tx) => {
      attempts++;
      await tx.run("INSERT INTO settings (name, value) VALUES ('killed', ?)", [String(attempts)]);
      if (attempts === 1) await tx.get("SELECT pg_terminate_backend(pg_backend_pid())");
    });
    expect(attempts).toBe(2);
    expect(await driver.read((tx) => tx.all("SELECT value FROM settings WHERE name = 'killed'"))).toEqual([{ value: "2" }]);
  });

  it("does not retry an ordinary error and rolls the transaction back", async () => {
    let attempts = 0;
    await expect(
      driver.transaction(async (tx) => {
        attempts++;
        await tx.run("INSERT INTO settings (name, value) VALUES ('rolled', 'x')");
        throw new Error("the state change failed");
      }),
    ).rejects.toThrow("the state change failed");
    expect(attempts).toBe(1);
    expect(await driver.read((tx) => tx.all("SELECT 1 FROM settings WHERE name = 'rolled'"))).toEqual([]);
  });

  it("runs a runWithCommit statement with the COMMIT: its text arrives exactly, and nothing may follow it", async () => {
    const value = "quote ' backslash \\ \\x00 newline \n emoji \u{1F600} $1 ?";
    await driver.transaction(async (tx) => {
      tx.runWithCommit("INSERT INTO settings (name, value) VALUES (?, ?)", ["with-commit", value]);
      await expect(tx.run("SELECT 1")).rejects.toThrow(/after its runWithCommit/);
    });
    expect(await driver.read((tx) => tx.all("SELECT value FROM settings WHERE name = 'with-commit'"))).toEqual([{ value }]);
  });

  it("stores any text sent by runWithCommit exactly as given", async () => {
    let row = 0;
    await fc.assert(
      fc.asyncProperty(literal_text, async (value) => {
        const name = `literal-${row++}`;
        await driver.transaction(async (tx) => tx.runWithCommit("INSERT INTO settings (name, value) VALUES (?, ?)", [name, value]));
        expect(await driver.read((tx) => tx.get("SELECT value FROM settings WHERE name = ?", [name]))).toEqual({ value });
      }),
      { numRuns: 60 },
    );
  });

  it("commits a runWithCommit statement whose negative parameter follows a minus sign, touching only the rows it names", async () => {
    await driver.transaction(async (tx) => {
      await tx.run("CREATE TABLE minus_check (k TEXT PRIMARY KEY, n BIGINT NOT NULL)");
      await tx.run("INSERT INTO minus_check (k, n) VALUES ('a', 0), ('b', 0)");
    });
    await driver.transaction(async (tx) => tx.runWithCommit("UPDATE minus_check SET n = 10-? WHERE k = ?", [-5, "a"]));
    expect(await driver.read((tx) => tx.all("SELECT k, n FROM minus_check ORDER BY k"))).toEqual([
      { k: "a", n: 15 },
      { k: "b", n: 0 },
    ]);
  });

  it("fails the transaction when its runWithCommit statement fails, commits nothing and leaves the connection usable", async () => {
    await expect(
      driver.transaction(async (tx) => {
        await tx.run("INSERT INTO settings (name, value) VALUES ('before-failed-last', 'x')");
        tx.runWithCommit("INSERT INTO settings (name, value) VALUES (?, ?)", ["with-commit", "a second row with the same name"]);
      }),
    ).rejects.toThrow(/duplicate key/);
    expect(await driver.read((tx) => tx.all("SELECT 1 FROM settings WHERE name = 'before-failed-last'"))).toEqual([]);
    // Every pooled connection still works: none was handed back inside the aborted transaction.
    const counts = await Promise.all(
      Array.from({ length: 8 }, () => driver.transaction((tx) => tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM settings WHERE name = 'with-commit'"))),
    );
    expect(counts.map((row) => row?.n)).toEqual(Array.from({ length: 8 }, () => 1));
  });

  it("prepares nothing with prepared_statements: false (for a pooler that cannot keep them)", async () => {
    const plain = new PostgresDriver({ url: schema.url, pool_connections_max: 1, prepared_statements: false });
    try {
      expect(await plain.read((tx) => tx.get("SELECT CAST(? AS INTEGER) AS one", [1]))).toEqual({ one: 1 });
      expect(await plain.read((tx) => tx.all("SELECT name FROM pg_prepared_statements"))).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it("prepares each statement once per connection, and prepares it again when another process changes a table's columns", async () => {
    const one = new PostgresDriver({ url: schema.url, pool_connections_max: 1 });
    const other = new PostgresDriver({ url: schema.url, pool_connections_max: 1 });
    try {
      await other.transaction((tx) => tx.run("CREATE TABLE reshaped (id INTEGER PRIMARY KEY, a TEXT NOT NULL)"));
      await other.transaction((tx) => tx.run("INSERT INTO reshaped (id, a) VALUES (1, 'x')"));
      const select = "SELECT * FROM reshaped WHERE id = ?";
      expect(await one.read((tx) => tx.get(select, [1]))).toEqual({ id: 1, a: "x" });
      const prepared = await one.read((tx) => tx.all<{ statement: string }>("SELECT statement FROM pg_prepared_statements"));
      expect(prepared.map((row) => row.statement)).toContain("SELECT * FROM reshaped WHERE id = $1");
      // A migration elsewhere: the prepared SELECT * would fail on every execution from now on.
      await other.transaction((tx) => tx.run("ALTER TABLE reshaped ADD COLUMN b TEXT NOT NULL DEFAULT 'y'"));
      let attempts = 0;
      const row = await one.transaction(async (tx) => {
        attempts++;
        return tx.get(select, [1]);
      });
      expect(row).toEqual({ id: 1, a: "x", b: "y" });
      expect(attempts).toBe(2);
      expect(await one.read((tx) => tx.get(select, [1]))).toEqual({ id: 1, a: "x", b: "y" });
      // The statements prepared under the old names go with their connection: it is closed once
      // released, and the next one prepares only the new names (they piled up, ~60 a rename).
      const names = await one.read((tx) => tx.all<{ name: string; statement: string }>("SELECT name, statement FROM pg_prepared_statements"));
      expect(names.filter((row) => row.statement === "SELECT * FROM reshaped WHERE id = $1")).toHaveLength(1);
      expect(names.filter((row) => row.statement === "SELECT statement FROM pg_prepared_statements")).toHaveLength(0);
    } finally {
      await one.close();
      await other.close();
    }
  });

  it("gives up on an unreachable server once its reconnect budget is spent, with the connection error", async () => {
    // The default budget (pg_reconnect_budget_ms, 10 s) rides out a restart; a short one keeps the test short.
    const nowhere = new PostgresDriver({ url: "postgres://postgres@127.0.0.1:1/test", reconnect_budget_ms: 300 });
    try {
      await expect(nowhere.transaction((tx) => tx.get("SELECT 1 AS one"))).rejects.toMatchObject({ code: "ECONNREFUSED" });
    } finally {
      await nowhere.close();
    }
  });

  it("ends a session wedged inside a transaction before another's statement waiting on its lock is cancelled", async () => {
    // The defaults keep this order: a wedged holder of the log's lock is ended first.
    expect(pg_idle_in_transaction_timeout_ms).toBeLessThan(pg_statement_timeout_ms);
    // The same order, scaled down: the holder is ended after 1 s idle, the waiter's statement may wait 4 s.
    await driver.migrate(migrations);
    const holder = new PostgresDriver({ url: schema.url, pool_connections_max: 1, idle_in_transaction_timeout_ms: 1_000, reconnect_budget_ms: 0 });
    const waiter = new PostgresDriver({ url: schema.url, pool_connections_max: 1, statement_timeout_ms: 4_000 });
    const locked = signal();
    const stuck = signal();
    try {
      const wedged = holder
        .transaction(async (tx) => {
          await tx.get("SELECT size FROM log_head WHERE id = 1 FOR UPDATE");
          locked.resolve();
          await stuck.promise; // a process whose event loop never comes back to this transaction
        })
        .catch((error: unknown) => error);
      await within("the holder to lock log_head", Promise.race([locked.promise, wedged.then((error) => Promise.reject(error))]));
      const size = await waiter.transaction((tx) => tx.get<{ size: number }>("SELECT size FROM log_head WHERE id = 1 FOR UPDATE"));
      expect(size?.size).toEqual(expect.any(Number));
      stuck.resolve();
      // The holder's COMMIT finds its session ended by the server: the outcome of a write is then unknown.
      expect(await wedged).toBeInstanceOf(Error);
    } finally {
      stuck.resolve();
      await holder.close();
      await waiter.close();
    }
  });

  it("runs at most pg_write_transactions_max write transactions at once; the others wait their turn, reads do not", async () => {
    let open = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let full!: () => void;
    const filled = new Promise<void>((resolve) => (full = resolve));
    const writes = Array.from({ length: pg_write_transactions_max + 3 }, (_, i) =>
      driver.transaction(async (tx) => {
        most = Math.max(most, ++open);
        if (open === pg_write_transactions_max) full();
        await gate;
        await tx.run("INSERT INTO settings (name, value) VALUES (?, 'x')", [`permit_${i}`]);
        open--;
      }),
    );
    await filled;
    // A read is not held back by the writes in flight or waiting; meanwhile no third write starts.
    expect(await driver.read((tx) => tx.get<{ one: number }>("SELECT 1 AS one"))).toEqual({ one: 1 });
    expect(open).toBe(pg_write_transactions_max);
    release();
    await Promise.all(writes);
    expect(most).toBe(pg_write_transactions_max);
    expect(await driver.read((tx) => tx.all("SELECT name FROM settings WHERE name LIKE 'permit_%'"))).toHaveLength(pg_write_transactions_max + 3);
  });

  it("reads the database's clock to within half the round trip it was measured over", async () => {
    // The offset comes from the sample with the shortest round trip, so it is off by at most half
    // of it; every sample's round trip fits inside the whole measurement, timed here.
    const measuring = Date.now();
    const clock = await driver.databaseClock();
    const error_ms = (Date.now() - measuring) / 2 + ms_rounding;
    // The database reads its time between two readings of the clock: it lies between them, give
    // or take that error.
    const before = clock().getTime();
    const database_ms = await databaseNowMs();
    const after = clock().getTime();
    expect(database_ms).toBeGreaterThanOrEqual(before - error_ms);
    expect(database_ms).toBeLessThanOrEqual(after + error_ms);
    expect(after).toBeGreaterThanOrEqual(before);
  });

  it("measures the clock offset against the wall clock the clock reads, so a wall-clock step is absorbed", async () => {
    const real_now = Date.now.bind(Date);
    let step_ms = 0;
    const wall = vi.spyOn(Date, "now").mockImplementation(() => real_now() + step_ms);
    try {
      const before = await driver.databaseClock();
      const read_before = before().getTime();
      const unstepped = await driver.measureClockOffset();
      // The host's wall clock is stepped after start (an NTP step, a VM resume, a manual fix).
      step_ms = 60_000;
      const measured = await driver.measureClockOffset();
      // The step shows whole in the offset: each measurement is off by at most half its round trip.
      const error_ms = (unstepped.round_trip_ms + measured.round_trip_ms) / 2 + 2 * ms_rounding;
      expect(Math.abs(measured.offset_ms - (unstepped.offset_ms - step_ms))).toBeLessThanOrEqual(error_ms);
      const measuring = real_now();
      const after = await driver.databaseClock(); // what the next resync leaves the clock at
      const after_error_ms = (real_now() - measuring) / 2 + ms_rounding;
      const reading_before = after().getTime();
      const database_ms = await databaseNowMs();
      const reading_after = after().getTime();
      expect(database_ms).toBeGreaterThanOrEqual(reading_before - after_error_ms);
      expect(database_ms).toBeLessThanOrEqual(reading_after + after_error_ms);
      // A backwards step: the clock holds still rather than run backwards.
      step_ms = -60_000;
      expect(before().getTime()).toBeGreaterThanOrEqual(read_before);
    } finally {
      wall.mockRestore();
    }
  });
});
