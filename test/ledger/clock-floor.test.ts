// A process given no clock starts its clock no earlier than the log's newest entry. Before, it
// took the host's time as it was: after a restart with the host's clock stepped back, a block
// that the previous process had seen expire (and refused under R2) took money again.

import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { monotonicClock } from "../../src/clock.js";
import { ClockBehindLogError, createBursar } from "../../src/index.js";
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
      // A block made an hour ago that expires a quarter of an hour from now, by the host's clock.
      const first = await createBursar({ db, signingKey, clock: manualClock(now - hour_ms) });
      const agent = await first.operator.createAgent({ name: "buyer" });
      const { block_id } = await first.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 4_500 });
      await first.close();

      // The host's clock ran half an hour ahead meanwhile: that process saw the block expire.
      const ahead = await createBursar({ db, signingKey, clock: manualClock(now + hour_ms / 2) });
      expect((await ahead.gate.callTool(agent.token, "create_order", { amount: 1_000, currency: "INR" })).structuredContent).toMatchObject({ rule: "R2" });
      await ahead.close();

      // Restarted after the host's clock stepped back to the right time: still past the expiry.
      const restarted = await createBursar({ db, signingKey });
      expect(restarted.clock().getTime()).toBeGreaterThanOrEqual(now + hour_ms / 2);
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
    // Not held back to the entry's time, nor moved anywhere near another hour on.
    expect(read).toBeLessThan(before + hour_ms);
    await restarted.close();
  });

  it("refuses to start from an entry more than an hour ahead, unless told to start on the clock as it reads", async () => {
    const db = join(dir, "years-ahead.db");
    const signingKey = generateKeyPairSync("ed25519").privateKey;
    const years_ahead = Date.now() + 5 * 365 * 24 * hour_ms;
    await (await createBursar({ db, signingKey, clock: manualClock(years_ahead) })).close();
    // Started from it, time would stand still for five years: nothing would expire.
    const refused = createBursar({ db, signingKey });
    await expect(refused).rejects.toBeInstanceOf(ClockBehindLogError);
    await expect(refused).rejects.toThrow(/^the log's newest entry was received at .*, 4380\d\.\d h ahead of the clock .* \(BURSAR_CLOCK_FROM_HOST=1; the library's clock_from_host\)/);
    const from_host = await createBursar({ db, signingKey, clock_from_host: true });
    expect(Math.abs(from_host.clock().getTime() - Date.now())).toBeLessThan(hour_ms);
    await from_host.close();
  });
});

describe("monotonicClock", () => {
  it("passes over a reading that is no time, which would otherwise stay the latest for good", () => {
    const readings = [1_000, Number.NaN, 2_000, 1_500];
    const clock = monotonicClock(() => readings.shift() as number);
    expect([clock(), clock(), clock(), clock()].map((at) => at.getTime())).toEqual([1_000, 1_000, 2_000, 2_000]);
  });
});
