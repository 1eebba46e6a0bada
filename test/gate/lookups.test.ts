// fetch_order and fetch_payment move no money but spend the merchant's provider API quota:
// each agent gets BURSAR_LOOKUPS_PER_MINUTE look-ups that reach the provider in any minute,
// and past that the tool answers rate_limited without a provider request.

import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { LookupBudget, lookup_agents_max } from "../../src/gate/lookups.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { manualClock } from "../support/clock.js";

let bursar: Bursar | undefined;
afterEach(async () => {
  await bursar?.close();
  bursar = undefined;
});

async function setup(lookups_per_minute: number) {
  const clock = manualClock();
  bursar = await createBursar({ db: ":memory:", clock, lookups_per_minute });
  const b = bursar;
  const agent = async (name: string) => {
    const created = await b.operator.createAgent({ name });
    await b.operator.createBlock({ agent_id: created.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
    return (tool: string, args: Record<string, unknown>) => b.gate.callTool(created.token, tool, args);
  };
  const providerRequests = () => b.simulator!.simulator.state.apiRequests();
  return { b, clock, agent, providerRequests };
}

describe("provider look-ups per agent per minute", () => {
  it("the fourth look-up of a minute answers rate_limited without asking the provider; other agents and the next minute are unaffected", async () => {
    const t = await setup(3);
    const alice = await t.agent("alice");
    const bob = await t.agent("bob");
    const order = (await alice("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
    const before = t.providerRequests();
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ order: { id: order.id } });
    for (const id of ["pay_Unknown1", "pay_Unknown2"]) {
      expect((await alice("fetch_payment", { payment_id: id })).structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER" });
    }
    expect(t.providerRequests()).toBe(before + 3);

    t.clock.advance(20_000);
    const limited = await alice("fetch_payment", { payment_id: "pay_Unknown3" });
    expect(limited.isError).toBe(true);
    expect(limited.structuredContent).toMatchObject({ error: { code: "rate_limited" }, retry_after_s: 40 });
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ error: { code: "rate_limited" } });
    expect(t.providerRequests()).toBe(before + 3);

    // Checks that need no provider still answer, and spend nothing.
    expect((await alice("fetch_payment", { payment_id: "not-a-payment" })).structuredContent).toMatchObject({ rule: "R0" });
    expect((await alice("fetch_order", { order_id: "order_NotAlices1" })).structuredContent).toMatchObject({ rule: "CALLER" });

    expect((await bob("fetch_payment", { payment_id: "pay_Unknown4" })).structuredContent).toMatchObject({ rule: "CALLER" });
    expect(t.providerRequests()).toBe(before + 4);

    t.clock.advance(40_000);
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ order: { id: order.id } });
    expect(t.providerRequests()).toBe(before + 5);
  });

  it("0 leaves look-ups unlimited", async () => {
    const t = await setup(0);
    const alice = await t.agent("alice");
    for (let index = 0; index < 100; index++) {
      expect((await alice("fetch_payment", { payment_id: `pay_Unknown${index}` })).structuredContent).toMatchObject({ rule: "CALLER" });
    }
  });

  it("remembers at most lookup_agents_max agents, forgetting the one seen least recently", () => {
    const clock = manualClock();
    const budget = new LookupBudget(1, clock);
    expect(budget.take("first").ok).toBe(true);
    expect(budget.take("first").ok).toBe(false);
    for (let index = 0; index < lookup_agents_max; index++) budget.take(`agent-${index}`);
    expect(budget.take("first").ok).toBe(true);
  });

  it("BURSAR_LOOKUPS_PER_MINUTE is an integer from 0 to 10000, named when it is not", () => {
    expect(loadConfig({ BURSAR_LOOKUPS_PER_MINUTE: "" }).lookups_per_minute).toBe(60);
    expect(loadConfig({ BURSAR_LOOKUPS_PER_MINUTE: "0" }).lookups_per_minute).toBe(0);
    for (const raw of ["-1", "10001", "1.5", "sixty"]) {
      expect(() => loadConfig({ BURSAR_LOOKUPS_PER_MINUTE: raw })).toThrow(/^BURSAR_LOOKUPS_PER_MINUTE=.*expected an integer from 0 to 10000/);
    }
  });
});
