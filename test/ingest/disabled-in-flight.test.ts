// A delivery authenticated before its source was disabled: the route checked the source before
// parsing the delivery, so the delivery's own transaction checks it again. One disabled since is
// refused with 403 and stores nothing; on PostgreSQL a disable still in flight (its row lock
// held, on any instance) is waited for, so no record lands after the disable's answer.

import pg from "pg";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { ingestDelivery } from "../../src/ingest/index.js";
import { SecretSealer } from "../../src/sources/sealed.js";
import { SourceStore } from "../../src/sources/store.js";
import { backends, closeAfterTest, lockWaiter } from "../support/backends.js";
import { ndjson, record } from "./support.js";

function sourceStore(bursar: Bursar): SourceStore {
  return new SourceStore({ driver: bursar.driver, log: bursar.log, sealer: new SecretSealer("disabled-in-flight-master-key-0123"), clock: systemClock });
}

const delivery = (event_id: string) => Buffer.from(ndjson([record(event_id)]));

for (const backend of backends()) {
  describe(`${backend.name}: a delivery whose source is disabled after the route's check`, () => {
    it("is refused with 403 and writes nothing", async () => {
      const db = await backend.db();
      const bursar = await createBursar({ db });
      closeAfterTest(bursar);
      const sources = sourceStore(bursar);
      const { source } = await sources.create({ kind: "decisions", name: "disabled-after-check" });
      const deps = { driver: bursar.driver, log: bursar.log, clock: systemClock };
      expect((await ingestDelivery(deps, source.id, delivery("evt_before"))).written).toBe(1);

      await sources.disable(source.id);
      const size = await bursar.log.treeSize();
      await expect(ingestDelivery(deps, source.id, delivery("evt_after"))).rejects.toMatchObject({ status: 403, code: "source_disabled" });
      expect(await bursar.log.treeSize()).toBe(size);
    });

    it.runIf(backend.name === "postgres")("waits for a disable in flight, then is refused", async () => {
      const db = await backend.db();
      const bursar = await createBursar({ db });
      closeAfterTest(bursar);
      const { source } = await sourceStore(bursar).create({ kind: "decisions", name: "disabled-in-flight" });
      const disabling = new pg.Client({ connectionString: db });
      await disabling.connect();
      try {
        // Where a disable on another instance stands: its row locked and changed, not committed.
        await disabling.query("BEGIN");
        await disabling.query("SELECT 1 FROM evidence_sources WHERE source_id = $1 FOR NO KEY UPDATE", [source.id]);
        await disabling.query("UPDATE evidence_sources SET disabled_at_ms = $1 WHERE source_id = $2", [Date.now(), source.id]);
        const waitedOn = await lockWaiter(disabling);
        const size = await bursar.log.treeSize();
        const ingest = ingestDelivery({ driver: bursar.driver, log: bursar.log, clock: systemClock }, source.id, delivery("evt_during"));
        ingest.catch(() => undefined);
        await waitedOn("the ingest to wait for the disable");
        await disabling.query("COMMIT");
        await expect(ingest).rejects.toMatchObject({ status: 403, code: "source_disabled" });
        expect(await bursar.log.treeSize()).toBe(size);
      } finally {
        await disabling.end();
      }
    });
  });
}
