// An agent's velocity rows past the longest window are pruned by its own decisions: at its first
// in a process, then every money_calls_prune_every of its own. One count for the whole process
// pruned only the agent whose decision was the 64th, so an agent whose decisions never fell there
// kept every row it ever made (a soak: 189,000 rows, ~80 bytes a call).

import { describe, expect, it } from "vitest";
import { openDriver } from "../../src/index.js";
import { money_calls_prune_every, pruneCalls, velocity_window_max_seconds } from "../../src/ledger/authorize.js";
import { migrations } from "../../src/ledger/migrations/index.js";
import { recordMoneyCall } from "../../src/ledger/statements.js";

describe("pruning velocity rows", () => {
  it("prunes each agent's old rows by its own decisions, whichever agent's decisions come 64th", async () => {
    const driver = openDriver(":memory:");
    await driver.migrate(migrations);
    const day_ms = velocity_window_max_seconds * 1000;
    const now_ms = 10 * day_ms;
    const [quiet, busy] = ["agt_PruneQuiet", "agt_PruneBusy"];
    const old = async (agent_id: string) =>
      Number((await driver.read((tx) => tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM money_calls WHERE agent_id = ? AND at_ms <= ?", [agent_id, now_ms - day_ms])))?.n);
    try {
      await driver.transaction(async (tx) => {
        for (let index = 0; index < 100; index++) {
          await recordMoneyCall(tx, quiet, now_ms - 3 * day_ms + index);
          await recordMoneyCall(tx, busy, now_ms - 3 * day_ms + index);
        }
      });
      // Rounds of one decision by the quiet agent, then 63 by the busy one: the 64th of every round is the busy agent's.
      await driver.transaction(async (tx) => {
        for (let round = 0; round <= money_calls_prune_every; round++) {
          if (round === 1) {
            // Rows made since the quiet agent's first decision pruned them: gone again 64 decisions later.
            for (let index = 0; index < 10; index++) await recordMoneyCall(tx, quiet, now_ms - 2 * day_ms + index);
          }
          await pruneCalls(tx, quiet, now_ms);
          for (let decision = 1; decision < money_calls_prune_every; decision++) await pruneCalls(tx, busy, now_ms);
        }
      });
      expect(await old(quiet)).toBe(0);
      expect(await old(busy)).toBe(0);
      // Rows inside the last day are kept: the velocity window may need them.
      await driver.transaction((tx) => recordMoneyCall(tx, quiet, now_ms - day_ms + 1));
      for (let decision = 0; decision < money_calls_prune_every; decision++) await driver.transaction((tx) => pruneCalls(tx, quiet, now_ms));
      expect(Number((await driver.read((tx) => tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM money_calls WHERE agent_id = ?", [quiet])))?.n)).toBe(1);
    } finally {
      await driver.close();
    }
  });
});
