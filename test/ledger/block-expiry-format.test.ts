// A block's expires_at is RFC 3339 with an offset. Date.parse, used before, also took strings
// that are not RFC 3339 and read offset-less ones in the server's time zone, so R2's expiry
// depended on the host: "2026-12-01T10:00:00" was 10:00Z on a UTC host, 04:30Z in Kolkata.

import { describe, expect, it } from "vitest";
import { testLedger } from "../support/ledger.js";

describe("expires_at must be RFC 3339 (with an offset)", () => {
  for (const expires_at of ["2026-12-01T10:00:00", "2026-12-01 10:00", "Dec 1 2026 10:00", "2026-12-01"]) {
    it(`${JSON.stringify(expires_at)} is refused with 422`, async () => {
      const t = await testLedger();
      const other = await t.bursar.operator.createAgent({ name: `other` });
      await expect(t.bursar.operator.createBlock({ agent_id: other.agent_id, currency: "INR", expires_at })).rejects.toMatchObject({
        status: 422,
      });
    });
  }

  it("an offset is honoured: 15:30+05:30 and 10:00Z are the same expiry", async () => {
    const t = await testLedger();
    const a = await t.bursar.operator.createAgent({ name: "utc" });
    const b = await t.bursar.operator.createAgent({ name: "ist" });
    const utc = await t.bursar.operator.createBlock({ agent_id: a.agent_id, currency: "INR", expires_at: "2026-12-01T10:00:00Z" });
    const ist = await t.bursar.operator.createBlock({ agent_id: b.agent_id, currency: "INR", expires_at: "2026-12-01T15:30:00+05:30" });
    expect(ist.expires_at).toBe(utc.expires_at);
    expect(utc.expires_at).toBe("2026-12-01T10:00:00.000Z");
  });

  it("names the field, the format and an example in the 422", async () => {
    const t = await testLedger();
    const other = await t.bursar.operator.createAgent({ name: "message" });
    await expect(t.bursar.operator.createBlock({ agent_id: other.agent_id, currency: "INR", expires_at: "2026-12-01 10:00" })).rejects.toThrow(
      /expires_at.*RFC 3339 time with an offset/,
    );
  });
});
