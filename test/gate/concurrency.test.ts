// Fifty parallel create_order calls over HTTP with distinct keys on a block that fits exactly
// ten: exactly ten are allowed, the rest are refused under R1, and the invariant holds.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

describe("concurrent create_order", () => {
  it("50 parallel calls on a block that fits 10 → exactly 10 ALLOW, 40 R1", async () => {
    const agent = await server.agent("race", {
      reserved: 100_000,
      per_call_cap: 10_000,
      approval_threshold: 10_000,
      velocity: { max_calls: 100, window_seconds: 60 },
    });
    const clients = await Promise.all(Array.from({ length: 5 }, () => server.client(agent.token)));
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        (clients[index % clients.length] as (typeof clients)[number]).callTool({
          name: "create_order",
          arguments: { amount: 10_000, currency: "INR", idempotency_key: `race-${index}` },
        }),
      ),
    );
    const rules = results.map((result) => {
      const structured = result.structuredContent as { effect: string; rule?: string };
      return structured.effect === "ALLOW" ? "ALLOW" : structured.rule;
    });
    expect(rules.filter((rule) => rule === "ALLOW")).toHaveLength(10);
    expect(rules.filter((rule) => rule === "R1")).toHaveLength(40);
    const block = (await server.api<{ held: number; spent: number; reserved: number }>("GET", `/api/v1/blocks/${agent.block_id}`)).body;
    expect(block.held + block.spent).toBe(100_000);
    expect(block.held + block.spent).toBeLessThanOrEqual(block.reserved);
  });
});
