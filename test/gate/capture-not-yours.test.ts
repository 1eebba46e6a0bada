// capture_payment answers a payment on none of the caller's orders alike, as fetch_payment does:
// another agent's, one on an order made outside the gate, and one the provider does not know.
// Told apart (CALLER "belongs to another agent", R3 "no reservation held by this gate", R3 "the
// provider did not confirm the payment (does not exist)"), they told an agent which ids exist
// and whose they are.

import { describe, expect, it } from "vitest";
import { createBursar, sequentialIds } from "../../src/index.js";
import { backends, closeAfterTest, isPostgresUrl } from "../support/backends.js";
import { payInProcess } from "../support/inprocess.js";

for (const backend of backends()) {
  describe(`${backend.name}: a capture of a payment that is not the caller's`, () => {
    it("is refused alike, by CALLER, whether another agent's, made outside the gate or unknown to the provider; fetch_payment agrees", async () => {
      const db = await backend.db();
      const b = await createBursar({ db, ids: sequentialIds() });
      if (isPostgresUrl(db)) closeAfterTest(b);
      const agents = [await b.operator.createAgent({ name: "alice" }), await b.operator.createAgent({ name: "bob" })];
      for (const agent of agents) await b.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000 });
      const [alice, bob] = agents.map((agent) => (tool: string, args: Record<string, unknown>) => b.gate.callTool(agent.token, tool, args));

      const alices_order = (await alice!("create_order", { amount: 5_000, currency: "INR" })).structuredContent.order as { id: string };
      const outside = await b.provider.createOrder({ amount: 5_000, currency: "INR", receipt: "made_outside_the_gate" });
      if (outside.kind !== "ok") throw new Error("the simulator made no order");
      const payments = {
        another_agents: await payInProcess(b, alices_order.id),
        outside_the_gate: await payInProcess(b, outside.value.id),
        unknown: "pay_NoSuchPayment9",
      };
      const answers = new Map<string, unknown>();
      for (const [what, payment_id] of Object.entries(payments)) {
        const captured = await bob!("capture_payment", { payment_id, amount: 5_000, currency: "INR" });
        const fetched = await bob!("fetch_payment", { payment_id });
        const reason = `payment ${payment_id} not found among the orders this agent created through the gate`;
        expect(captured.structuredContent, what).toMatchObject({ effect: "BLOCK", rule: "CALLER", reason });
        expect(fetched.structuredContent, what).toMatchObject({ effect: "BLOCK", rule: "CALLER", reason });
        // The same answer but for the id: the one line a model reads and its structured content.
        const { evidence: _evidence, ...rest } = captured.structuredContent;
        answers.set(JSON.stringify({ text: captured.content[0]?.text, rest }).replaceAll(payment_id, "pay_ID"), what);
      }
      expect([...answers.values()]).toHaveLength(1);
      // A capture an earlier rule refuses anyway is decided without asking the provider, so
      // CALLER, which needs the payment, is not reached (docs/rules.md): refused under that rule.
      const lookups_before = b.simulator!.simulator.state.apiRequests();
      const wrong_currency = await bob!("capture_payment", { payment_id: payments.another_agents, amount: 5_000, currency: "USD" });
      expect(wrong_currency.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R0" });
      expect(JSON.stringify(wrong_currency.structuredContent)).not.toContain(payments.another_agents);
      expect(b.simulator!.simulator.state.apiRequests()).toBe(lookups_before);
      // Alice's own capture of her payment is still allowed.
      expect((await alice!("capture_payment", { payment_id: payments.another_agents, amount: 5_000, currency: "INR" })).structuredContent).toMatchObject({ effect: "ALLOW" });
      if (!isPostgresUrl(db)) await b.close();
    });
  });
}
