// A money call whose decision COMMIT reached PostgreSQL but whose answer was lost (the
// connection was cut): the agent gets a tool result saying the outcome is unknown, not a
// protocol error; the hold stands, and the same call with the same key is refused while the
// key is in flight rather than decided twice.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { startPgProxy, type PgProxy } from "../support/pg-proxy.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("a money call whose COMMIT went unconfirmed", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  let proxy: PgProxy;
  let bursar: Bursar;

  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    proxy = await startPgProxy(pg_server as string);
    bursar = await createBursar({ db: proxy.url(schema.url) });
  });
  afterAll(async () => {
    await bursar?.close();
    await proxy?.close();
    await schema?.drop();
  });

  it("answers commit_unknown as a tool result, keeps the hold, and refuses the repeat while in flight", async () => {
    const agent = await bursar.operator.createAgent({ name: "buyer" });
    const block = await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 100_000, ttl_seconds: 3_600 });
    const args = { amount: 5_000, currency: "INR", idempotency_key: "cut-at-commit" };
    // The next COMMIT is the decision's (sent with the batch's last INSERT into the log): it
    // commits, and its answer never arrives.
    proxy.arm({ sql: /(^|; )COMMIT$/, when: "after_reply" });
    const result = await bursar.gate.callToolAs(agent.agent_id, "create_order", args);
    expect(proxy.cut).toHaveLength(1);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: { code: "commit_unknown" } });
    expect((await bursar.ledger.getBlock(block.block_id)).held).toBe(5_000);
    const again = await bursar.gate.callToolAs(agent.agent_id, "create_order", args);
    expect(again.structuredContent).toMatchObject({ effect: "BLOCK", rule: "IN_FLIGHT" });
    expect((await bursar.ledger.getBlock(block.block_id)).held).toBe(5_000);
  });
});
