// Two transactions binding one payment to two reservations at once, on PostgreSQL: each finds
// the payment unbound (READ COMMITTED; each locks only its own reservation's block), and the
// later one's write fails on reservations_payment_id_key once the earlier commits. Two instances
// settling a provider's report of one payment on two orders did this, and one answered 500 and
// froze nothing. The driver runs the later again, and it finds the payment bound elsewhere.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBursar, type Bursar } from "../../src/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";

const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("one payment bound to two reservations at once", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  let b: Bursar;
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    b = await createBursar({ db: schema.url });
  });
  afterAll(async () => {
    await b?.close();
    await schema?.drop();
  });

  /** An agent's held reservation for an allowed order. */
  async function heldReservation(name: string): Promise<string> {
    const agent = await b.operator.createAgent({ name });
    await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 100_000, ttl_seconds: 86_400 });
    const result = await b.gate.callTool(agent.token, "create_order", { amount: 10_000, currency: "INR" });
    return result.structuredContent.reservation_id as string;
  }

  it("runs the later transaction again, which then finds the payment bound elsewhere", async () => {
    const first = await heldReservation("bind-race-a");
    const second = await heldReservation("bind-race-b");
    const bind = "UPDATE reservations SET payment_id = ? WHERE reservation_id = ?";
    const boundTo = "SELECT reservation_id FROM reservations WHERE payment_id = ?";
    let bound!: () => void;
    const earlier_bound = new Promise<void>((resolve) => (bound = resolve));
    let looked!: () => void;
    const later_looked = new Promise<void>((resolve) => (looked = resolve));

    // The earlier binds the payment and commits only once the later has looked and found it free.
    const earlier = b.driver.transaction(async (tx) => {
      await tx.run(bind, ["pay_BindRace1", first]);
      bound();
      await later_looked;
    });
    await earlier_bound;
    let attempts = 0;
    const later = await b.driver.transaction(async (tx) => {
      attempts += 1;
      const found = await tx.get<{ reservation_id: string }>(boundTo, ["pay_BindRace1"]);
      looked();
      if (found) return `bound elsewhere: ${found.reservation_id}`;
      await tx.run(bind, ["pay_BindRace1", second]);
      return "bound here";
    });
    await earlier;
    expect(later).toBe(`bound elsewhere: ${first}`);
    expect(attempts).toBe(2);
  });
});
