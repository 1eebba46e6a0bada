// Disabling an agent: its token authenticates nothing from then on, so a hostile agent's calls
// stop reaching the ledger and the log (a revoked block still refused each with an evidence
// entry and a velocity row). Other instances sharing the database follow within agent_cache_ms.

import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { agent_cache_ms } from "../../src/ledger/ledger.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

for (const backend of backends()) {
  describe(`${backend.name}: disabling an agent`, () => {
    it("refuses its calls before the ledger, writes one log entry, and is idempotent; an unknown agent is 404", async () => {
      const db = await backend.db();
      const b = await createBursar({ db, clock: manualClock() });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "hostile" });
      await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
      expect((await b.gate.callTool(agent.token, "create_order", { amount: 1_000, currency: "INR" })).structuredContent).toMatchObject({ effect: "ALLOW" });

      const disabled = await b.ledger.disableAgent(agent.agent_id);
      expect(disabled).toMatchObject({ agent_id: agent.agent_id, name: "hostile", disabled_at: expect.any(String) });
      const size = await b.log.treeSize();
      const [entry] = await b.log.entries(size - 1, size);
      expect(entry?.entry).toMatchObject({ kind: "gate.operator", body: { action: "agent.disable", agent_id: agent.agent_id } });

      for (let index = 0; index < 5; index++) {
        const refused = await b.gate.callTool(agent.token, "create_order", { amount: 1_000, currency: "INR", idempotency_key: `after-${index}` });
        expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER", reason: "no agent holds this token" });
      }
      expect(await b.log.treeSize()).toBe(size);
      expect(await b.ledger.disableAgent(agent.agent_id)).toEqual(disabled);
      expect(await b.log.treeSize()).toBe(size);
      await expect(b.ledger.disableAgent("agt_nobody")).rejects.toMatchObject({ status: 404, code: "not_found" });
      if (!isPostgresUrl(db)) await b.close();
    });

    it("refuses a new block for a disabled agent (409 agent_disabled), which could never be used, and records nothing", async () => {
      const db = await backend.db();
      const b = await createBursar({ db, clock: manualClock() });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "retired" });
      const block = await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
      await b.ledger.disableAgent(agent.agent_id);
      await b.ledger.revoke(block.block_id);
      const size = await b.log.treeSize();
      await expect(b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 })).rejects.toMatchObject({
        status: 409,
        code: "agent_disabled",
        message: `agent_id: agent ${agent.agent_id} is disabled; a block for it could never be used`,
      });
      expect(await b.log.treeSize()).toBe(size);
      if (!isPostgresUrl(db)) await b.close();
    });
  });
}

describe("disabling an agent through another instance sharing the database", () => {
  it("stops the token here once this instance's cached agent is agent_cache_ms old", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bursar-disable-"));
    const clock = manualClock();
    const path = join(dir, "bursar.db");
    const { privateKey: signingKey } = generateKeyPairSync("ed25519");
    const here = await createBursar({ db: path, clock, signingKey });
    const there = await createBursar({ db: path, clock, signingKey });
    try {
      const agent = await here.operator.createAgent({ name: "shared" });
      expect(await here.ledger.authenticateAgent(agent.token)).toMatchObject({ agent_id: agent.agent_id });
      await there.ledger.disableAgent(agent.agent_id);
      expect(await there.ledger.authenticateAgent(agent.token)).toBeNull();
      clock.advance(agent_cache_ms - 1);
      expect(await here.ledger.authenticateAgent(agent.token)).toMatchObject({ agent_id: agent.agent_id });
      clock.advance(1);
      expect(await here.ledger.authenticateAgent(agent.token)).toBeNull();
    } finally {
      await here.close();
      await there.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
