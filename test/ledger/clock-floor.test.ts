// A process given no clock starts its clock no earlier than the log's newest entry. Before, it
// took the host's time as it was: after a restart with the host's clock stepped back, a block
// that the previous process had seen expire (and refused under R2) took money again.

import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { backends } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

const dir = mkdtempSync(join(tmpdir(), "bursar-clock-floor-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const hour_ms = 3_600_000;

describe("the clock of a process given none", () => {
  for (const backend of backends()) {
    it(`starts at the log's newest entry, so a block seen expired stays expired across a restart (${backend.name})`, async () => {
      // On PostgreSQL it is the database's clock, floored the same way.
      const db = backend.name === "sqlite" ? join(dir, "stepped-back.db") : await backend.db();
      const signingKey = generateKeyPairSync("ed25519").privateKey;
      const now = Date.now();
      // A block made an hour ago that expires an hour from now, by the host's clock.
      const first = await createBursar({ db, signingKey, clock: manualClock(now - hour_ms) });
      const agent = await first.operator.createAgent({ name: "buyer" });
      const { block_id } = await first.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 2 * 3_600 });
      await first.close();

      // The host's clock ran two hours ahead meanwhile: that process saw the block expire.
      const ahead = await createBursar({ db, signingKey, clock: manualClock(now + 2 * hour_ms) });
      expect((await ahead.gate.callTool(agent.token, "create_order", { amount: 1_000, currency: "INR" })).structuredContent).toMatchObject({ rule: "R2" });
      await ahead.close();

      // Restarted after the host's clock stepped back to the right time: still past the expiry.
      const restarted = await createBursar({ db, signingKey });
      expect(restarted.clock().getTime()).toBeGreaterThanOrEqual(now + 2 * hour_ms);
      const refused = await restarted.gate.callTool(agent.token, "create_order", { amount: 100_000, currency: "INR" });
      expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R2" });
      expect(await restarted.operator.getBlock(block_id)).toMatchObject({ held: 0, spent: 0 });
      await restarted.close();
    });
  }

  it("is the host's on a log whose entries are all in the past", async () => {
    const db = join(dir, "past.db");
    const signingKey = generateKeyPairSync("ed25519").privateKey;
    await (await createBursar({ db, signingKey, clock: manualClock(Date.now() - hour_ms) })).close();
    const restarted = await createBursar({ db, signingKey });
    const before = Date.now();
    const read = restarted.clock().getTime();
    expect(read).toBeGreaterThanOrEqual(before);
    expect(read).toBeLessThan(before + 1_000);
    await restarted.close();
  });
});
