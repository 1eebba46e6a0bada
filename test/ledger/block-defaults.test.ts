// DESIGN.md's reference defaults, for a block created without them: written out here as the
// design states them, not read from the code's constants, so a changed default fails.

import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { sequentialIds } from "../../src/ids.js";
import { manualClock } from "../support/clock.js";

const day_ms = 24 * 3600 * 1000;

describe("a block created without limits", () => {
  it("takes DESIGN.md's reference defaults: reserved 1,000,000, per-call cap 500,000, approval threshold 200,000, 10 calls / 60 s, 30 days; approvals last 15 minutes", async () => {
    const clock = manualClock();
    const bursar = await createBursar({ db: ":memory:", clock, ids: sequentialIds() });
    try {
      const agent = await bursar.operator.createAgent({ name: "defaults" });
      const block = await bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR" });
      expect(block).toMatchObject({
        reserved: 1_000_000,
        per_call_cap: 500_000,
        approval_threshold: 200_000,
        velocity: { max_calls: 10, window_seconds: 60 },
        expires_at: new Date(clock().getTime() + 30 * day_ms).toISOString(),
        spent: 0,
        held: 0,
        available: 1_000_000,
      });
      expect(bursar.ledger.context.approval_lifetime_ms).toBe(15 * 60 * 1000);
    } finally {
      await bursar.close();
    }
  });
});
