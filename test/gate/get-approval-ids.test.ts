// get_approval with an approval id an agent made up: whatever string it holds (a NUL, which
// PostgreSQL text cannot store, a path, a megabyte), it gets the refusal every unknown id gets,
// on both backends, and a real id of its own still reads. One that is not a string at all is a
// malformed call, refused under R0 as fetch_order and fetch_payment refuse one.

import { describe, expect, it } from "vitest";
import { createBursar } from "../../src/index.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { manualClock } from "../support/clock.js";

const made_up: Array<[string, unknown]> = [
  ["a NUL inside", "apr_x\u0000y"],
  ["a NUL alone", "\u0000"],
  ["a path", "apr_x/../../approvals"],
  ["a megabyte", `apr_${"a".repeat(1_048_576)}`],
  ["the empty string", ""],
];

const not_a_string: Array<[string, unknown]> = [
  ["null", null],
  ["a number", 123],
  ["an empty object", {}],
  ["an object holding an id", { approval_id: "apr_x" }],
  ["an array", ["apr_x"]],
  ["a boolean", true],
  ["nothing", undefined],
];

for (const backend of backends()) {
  describe(`${backend.name}: get_approval with a made-up id`, () => {
    it("refuses each string under CALLER, anything else under R0, and reads the agent's own approval", async () => {
      const db = await backend.db();
      const b = await createBursar({ db, clock: manualClock() });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agent = await b.operator.createAgent({ name: "curious" });
      await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400, approval_threshold: 1_000 });
      const held = await b.gate.callTool(agent.token, "create_order", { amount: 5_000, currency: "INR", idempotency_key: "big" });
      const approval_id = (held.structuredContent as { approval_id: string }).approval_id;
      for (const [name, id] of made_up) {
        const result = await b.gate.callTool(agent.token, "get_approval", { approval_id: id });
        expect(result.structuredContent, name).toEqual({ effect: "BLOCK", rule: "CALLER", reason: "no such approval for this agent" });
      }
      for (const [name, id] of not_a_string) {
        const result = await b.gate.callTool(agent.token, "get_approval", { approval_id: id });
        expect(result.structuredContent, name).toEqual({ effect: "BLOCK", rule: "R0", reason: "approval_id must be a string" });
      }
      expect((await b.gate.callTool(agent.token, "get_approval", { approval_id })).structuredContent).toMatchObject({ approval_id, state: "pending" });
      if (!isPostgresUrl(db)) await b.close();
    });
  });
}
