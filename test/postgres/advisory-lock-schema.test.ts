// The advisory lock that numbers an agent's money calls is the whole database's, not a schema's:
// its key holds the schema, so two deployments in two schemas of one database (or two test
// runs) whose agents share an id do not wait on each other.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { recordMoneyCall } from "../../src/ledger/statements.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("the money-call numbering lock", () => {
  const schemas: Array<Awaited<ReturnType<typeof freshSchema>>> = [];
  const bursars: Bursar[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 2; i++) {
      const schema = await freshSchema(pg_server as string);
      schemas.push(schema);
      bursars.push(await createBursar({ db: schema.url }));
    }
  });
  afterAll(async () => {
    for (const bursar of bursars) await bursar.close();
    for (const schema of schemas) await schema.drop();
  });

  it("lets an agent of the same id in another schema record a call while the first holds it", async () => {
    const [first, second] = bursars as [Bursar, Bursar];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let taken: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (taken = resolve));
    const held = first.driver.transaction(async (tx) => {
      await recordMoneyCall(tx, "agt_same", Date.now());
      taken();
      await released;
    });
    await holding;
    // Should the other schema wait on the lock, the first lets go after 3 s, and says so (well
    // before the server's idle-in-transaction timeout could end it and free the lock anyway).
    let waited_for_first = false;
    const fallback = setTimeout(() => {
      waited_for_first = true;
      release();
    }, 3_000);
    await second.driver.transaction((tx) => recordMoneyCall(tx, "agt_same", Date.now()));
    release();
    clearTimeout(fallback);
    await held;
    expect(waited_for_first).toBe(false);
  });
});
