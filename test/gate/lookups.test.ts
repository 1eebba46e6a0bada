// fetch_order, fetch_payment and fetch_order_payments move no money but spend the merchant's provider API quota:
// each agent gets BURSAR_LOOKUPS_PER_MINUTE look-ups that reach the provider in any minute,
// and past that the tool answers rate_limited without a provider request.

import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { LookupBudget, lookup_agents_max } from "../../src/gate/lookups.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { manualClock } from "../support/clock.js";
import { toolCallers } from "../support/inprocess.js";
import { testServer } from "../support/server.js";

let bursar: Bursar | undefined;
afterEach(async () => {
  await bursar?.close();
  bursar = undefined;
});

async function setup(lookups_per_minute: number) {
  const clock = manualClock();
  bursar = await createBursar({ db: ":memory:", clock, lookups_per_minute });
  return { b: bursar, clock, ...toolCallers(bursar) };
}

describe("provider look-ups per agent per minute", () => {
  it("the fourth look-up of a minute answers rate_limited without asking the provider; other agents and the next minute are unaffected", async () => {
    const t = await setup(3);
    const alice = await t.agent("alice");
    const bob = await t.agent("bob");
    const order = (await alice("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
    const before = t.providerRequests();
    // Checks that need no provider answer without spending a look-up.
    for (let index = 0; index < 5; index++) {
      expect((await alice("fetch_payment", { payment_id: "not-a-payment" })).structuredContent).toMatchObject({ rule: "R0" });
      expect((await alice("fetch_order", { order_id: "order_NotAlices1" })).structuredContent).toMatchObject({ rule: "CALLER" });
    }
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ order: { id: order.id } });
    for (const id of ["pay_Unknown1", "pay_Unknown2"]) {
      expect((await alice("fetch_payment", { payment_id: id })).structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER" });
    }
    expect(t.providerRequests()).toBe(before + 3);

    t.clock.advance(20_500);
    const limited = await alice("fetch_payment", { payment_id: "pay_Unknown3" });
    expect(limited.isError).toBe(true);
    expect(limited.structuredContent).toEqual({
      error: { code: "rate_limited", message: expect.stringContaining("3 provider look-ups"), details: { retry_after_s: 40 } },
    });
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ error: { code: "rate_limited" } });
    expect(t.providerRequests()).toBe(before + 3);

    // Past the limit too, checks that need no provider still answer.
    expect((await alice("fetch_payment", { payment_id: "not-a-payment" })).structuredContent).toMatchObject({ rule: "R0" });

    expect((await bob("fetch_payment", { payment_id: "pay_Unknown4" })).structuredContent).toMatchObject({ rule: "CALLER" });
    expect(t.providerRequests()).toBe(before + 4);

    // 59,999 ms after the first look-up it is still in the window; at 60,000 ms it is not.
    t.clock.advance(39_499);
    expect((await alice("fetch_order", { order_id: order.id })).structuredContent).toMatchObject({ error: { details: { retry_after_s: 1 } } });
    t.clock.advance(1);
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

  it("a clock set back forgets the look-ups after it instead of locking the agent out", () => {
    let now_ms = 3_600_000;
    const budget = new LookupBudget(2, () => now_ms);
    expect(budget.take("agent").ok).toBe(true);
    expect(budget.take("agent").ok).toBe(true);
    expect(budget.take("agent")).toEqual({ ok: false, retry_after_s: 60 });
    now_ms = 0;
    expect(budget.take("agent").ok).toBe(true);
    expect(budget.take("agent").ok).toBe(true);
    expect(budget.take("agent")).toEqual({ ok: false, retry_after_s: 60 });
  });

  it("bursar serve takes BURSAR_LOOKUPS_PER_MINUTE and counts rate_limited answers in /metrics", async () => {
    const server = await testServer({ BURSAR_LOOKUPS_PER_MINUTE: "1" });
    try {
      const { token } = await server.agent("looper");
      const client = await server.client(token);
      await client.callTool({ name: "fetch_payment", arguments: { payment_id: "pay_Unknown1" } });
      const limited = await client.callTool({ name: "fetch_payment", arguments: { payment_id: "pay_Unknown2" } });
      expect(limited.structuredContent).toMatchObject({ error: { code: "rate_limited" } });
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toMatch(/bursar_lookups_limited_total\{tool="fetch_payment"\} 1\b/);
    } finally {
      await server.close();
    }
  });

  it("remembers at most lookup_agents_max agents, forgetting the one seen least recently", () => {
    const budget = new LookupBudget(1, () => 0);
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
