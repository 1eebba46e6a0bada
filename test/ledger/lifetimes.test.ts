// The library's lease and approval lifetimes are whole milliseconds in range, checked before
// anything is opened. "900000" (text, as read from an environment variable) was joined to a time
// as text, and Infinity never ran out: either way a HOLD's approval never expired and its money
// stayed held for good.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { lifetime_ms_max } from "../../src/ledger/index.js";

const dir = mkdtempSync(join(tmpdir(), "bursar-lifetimes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("createBursar's lifetimes", () => {
  const refused: Array<[string, Record<string, unknown>, RegExp]> = [
    ["an approval lifetime given as text", { approval_lifetime_ms: "900000" }, /^approval_lifetime_ms must be a whole number of milliseconds from 1 to 7776000000, not "900000"$/],
    ["an approval lifetime that never runs out", { approval_lifetime_ms: Number.POSITIVE_INFINITY }, /^approval_lifetime_ms .* not Infinity$/],
    ["an approval lifetime past a block's longest life", { approval_lifetime_ms: lifetime_ms_max.approval_lifetime_ms + 1 }, /^approval_lifetime_ms .* from 1 to 7776000000/],
    ["an approval lifetime of 0", { approval_lifetime_ms: 0 }, /^approval_lifetime_ms .* not 0$/],
    ["a lease of 1e300", { lease_ms: 1e300 }, /^lease_ms must be a whole number of milliseconds from 1 to 3600000, not 1e\+300$/],
    ["a lease of half a millisecond", { lease_ms: 0.5 }, /^lease_ms .* not 0.5$/],
    ["a lease that is not a number", { lease_ms: Number.NaN }, /^lease_ms .* not NaN$/],
  ];
  for (const [name, options, message] of refused) {
    it(`refuses ${name}, opening nothing`, async () => {
      const db = join(dir, `${name.replaceAll(" ", "-")}.db`);
      await expect(createBursar({ db, ...options })).rejects.toThrow(message);
      expect(existsSync(db)).toBe(false);
    });
  }

  it("takes lifetimes at their limits", async () => {
    const bursar = await createBursar({ db: ":memory:", lease_ms: lifetime_ms_max.lease_ms, approval_lifetime_ms: 1 });
    await bursar.close();
  });
});
