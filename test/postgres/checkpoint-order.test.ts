// Checkpoints cut by several instances sharing one PostgreSQL database are stored in size order.
// A checkpoint's transaction read the latest checkpoint without a lock, so two instances could
// both read the same one, and the smaller tree be stored after the larger had committed. It now
// takes the log's lock first. The interleaving is made by a plain session holding that lock, so
// no timing decides it: the checkpoint must wait for it, then store a size past the latest.

import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { freshSchema, lockWaiter, postgresServerUrl } from "../support/backends.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("a checkpoint beside another instance's transaction holding the log lock", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  let bursar: Bursar;
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    bursar = await createBursar({ db: schema.url });
  });
  afterAll(async () => {
    await bursar?.close();
    await schema?.drop();
  });

  it("waits for the lock, then stores a checkpoint no smaller than every one stored before", async () => {
    await bursar.operator.createAgent({ name: "checkpoint-order" });
    const other = new pg.Client({ connectionString: schema!.url });
    await other.connect();
    try {
      // Where another instance's checkpoint (or append) stands once it has the log's lock.
      await other.query("BEGIN");
      await other.query("SELECT size FROM log_head WHERE id = 1 FOR UPDATE");
      const waitedOn = await lockWaiter(other);
      const cut = bursar.log.checkpoint();
      await waitedOn("the checkpoint to wait for the log lock");
      await other.query("ROLLBACK");
      const stored = await cut;
      const sizes = (await other.query<{ tree_size: string }>("SELECT tree_size FROM log_checkpoints ORDER BY xmin::text::bigint, tree_size")).rows.map((row) => Number(row.tree_size));
      expect(sizes.at(-1)).toBe(stored.size);
      expect(sizes).toEqual([...sizes].sort((a, b) => a - b));
    } finally {
      await other.end();
    }
  });
});
