// A change to an evidence source (rotate, disable, shadow settings) against an ingest into it, on
// one PostgreSQL database. The change locks the source's row, then waits for the log's sequence
// lock to append its evidence; an ingest holds that lock while its rows' foreign keys check the
// same source row (FOR KEY SHARE). With the row locked FOR UPDATE the two deadlocked, and the log
// lock stayed held for PostgreSQL's deadlock_timeout, stalling every instance's writes. The
// interleaving is made here by a plain session holding the log lock, so no timing decides it.

import { generateKeyPairSync } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { SecretSealer } from "../../src/sources/sealed.js";
import { SourceStore } from "../../src/sources/store.js";
import { freshSchema, lockWaiter, postgresServerUrl } from "../support/backends.js";

const pg_server = postgresServerUrl();
/** Two instances of one log sign with one key. */
const signingKey = generateKeyPairSync("ed25519").privateKey;

describe.skipIf(!pg_server)("evidence source changes beside an ingest holding the log lock", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  let bursar: Bursar;
  let sources: SourceStore;
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    bursar = await createBursar({ db: schema.url, signingKey });
    sources = new SourceStore({ driver: bursar.driver, log: bursar.log, sealer: new SecretSealer("source-lock-master-key-0123456789"), clock: systemClock });
  });
  afterAll(async () => {
    await bursar?.close();
    await schema?.drop();
  });

  const changes: Array<[string, "decisions" | "observer", (source_id: string) => Promise<unknown>]> = [
    ["rotate", "decisions", (id) => sources.rotate(id, 60)],
    ["disable", "decisions", (id) => sources.disable(id)],
    ["setShadow", "observer", (id) => sources.setShadow(id, null)],
  ];

  it.each(changes)("%s leaves the source row open to the foreign-key checks of an ingest", async (name, kind, change) => {
    const { source } = await sources.create({ kind, name: `lock-${name}`, ...(kind === "observer" ? { upstream_url: "http://127.0.0.1:9/mcp" } : {}) });
    const ingest = new pg.Client({ connectionString: schema!.url });
    await ingest.connect();
    try {
      // Where an ingest stands once it has the log's sequence lock.
      await ingest.query("BEGIN");
      await ingest.query("SELECT size FROM log_head WHERE id = 1 FOR UPDATE");
      const waitedOn = await lockWaiter(ingest);
      const changed = change(source.id);
      // The change has locked the source's row and now waits for the log lock this session holds.
      await waitedOn(`${name} to wait for the log lock`);
      // What the foreign key of an ingest_deliveries or ingest_records row takes on its source.
      const checked = await ingest.query("SELECT 1 FROM evidence_sources WHERE source_id = $1 FOR KEY SHARE NOWAIT", [source.id]);
      expect(checked.rowCount).toBe(1);
      await ingest.query("ROLLBACK");
      await changed;
    } finally {
      await ingest.end();
    }
  });

  it("rotate keeps at most two signing keys, as on SQLite: a rotation ends an earlier one's grace", async () => {
    const { source } = await sources.create({ kind: "decisions", name: "rotate-bound" });
    for (let n = 0; n < 3; n++) await sources.rotate(source.id, 86_400);
    expect(await sources.signingKeys(source.id)).toHaveLength(2);
  });

  it("a rotation repeated with its Idempotency-Key on two instances at once rotates once, and both hear its answer", async () => {
    const other = await createBursar({ db: schema!.url, signingKey });
    try {
      const sealer = new SecretSealer("source-lock-master-key-0123456789");
      const elsewhere = new SourceStore({ driver: other.driver, log: other.log, sealer, clock: systemClock });
      const { source } = await sources.create({ kind: "decisions", name: "rotate-twice-at-once" });
      const [one, two] = await Promise.all([sources.rotate(source.id, 60, "lost-answer"), elsewhere.rotate(source.id, 60, "lost-answer")]);
      expect(one.secrets).toEqual(two.secrets);
      expect([one.replayed, two.replayed].filter(Boolean)).toHaveLength(1);
      expect(await sources.signingKeys(source.id)).toHaveLength(2);
    } finally {
      await other.close();
    }
  });
});
