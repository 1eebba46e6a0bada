// For tests of an in-process Bursar (createBursar, simulator mounted): paying an order at the
// simulator's test checkout, letting an authorization run out, refunding a capture, reading back the
// gate.decision entry a tool result names, a provider that misbehaves in one way, and agents
// that call tools by name.

import { expect } from "vitest";
import { canonicalJson } from "../../src/evidence/canonical.js";
import type { StoredEntry } from "../../src/evidence/store.js";
import type { Bursar } from "../../src/index.js";
import type { ToolResult } from "../../src/gate/results.js";
import type { Provider } from "../../src/provider/port.js";

/** The gate's provider with some methods replaced: a provider that misbehaves in one way. Returns
 *  the real one, for restoreProvider. */
export function replaceProvider(b: Bursar, methods: Partial<Provider>): Provider {
  const context = b.gate.gateContext as { provider: Provider };
  const real = context.provider;
  context.provider = Object.assign(Object.create(real) as Provider, methods);
  return real;
}

export function restoreProvider(b: Bursar, real: Provider): void {
  (b.gate.gateContext as { provider: Provider }).provider = real;
}

/** The body of the decision entry a tool result's evidence names, and the entry's canonical text. */
export async function decisionBody(b: Bursar, result: { structuredContent: Record<string, unknown> }): Promise<{ body: Record<string, unknown>; text: string }> {
  const { seq } = result.structuredContent.evidence as { seq: number };
  const [stored] = await b.log.entries(seq, seq + 1);
  const entry = (stored as StoredEntry).entry;
  expect(entry.kind).toBe("gate.decision");
  return { body: entry.body as Record<string, unknown>, text: canonicalJson(entry) };
}

/** Pays an order at the in-process simulator's test checkout; returns the payment id. */
export async function payInProcess(b: Bursar, order_id: string, card = "4111111111111111"): Promise<string> {
  const response = await b.simulator!.app.inject({ method: "POST", url: `/simulator/sim/orders/${order_id}/pay`, payload: { card } });
  expect(response.statusCode).toBeLessThan(300);
  return (response.json() as { razorpay_payment_id: string }).razorpay_payment_id;
}

/** The merchant refunds a captured payment at the in-process simulator: `refunded`, still `captured: true`. */
export async function refundInProcess(b: Bursar, payment_id: string): Promise<void> {
  const response = await b.simulator!.app.inject({ method: "POST", url: `/simulator/sim/payments/${payment_id}/refund` });
  expect(response.json()).toMatchObject({ id: payment_id, status: "refunded", captured: true });
}

/** Lets an authorization run out at the in-process simulator: it is refunded, never captured. */
export async function expireInProcess(b: Bursar, payment_id: string): Promise<void> {
  const response = await b.simulator!.app.inject({ method: "POST", url: `/simulator/sim/payments/${payment_id}/expire` });
  expect(response.json()).toMatchObject({ id: payment_id, status: "refunded", captured: false });
}

/** Makes agents on `b`, each with a block of 1,000,000 INR for a day, that call tools by name;
 *  and reads how many requests the mounted simulator's API has answered. */
export function toolCallers(b: Bursar) {
  const agent = async (name: string) => {
    const created = await b.operator.createAgent({ name });
    await b.operator.createBlock({ agent_id: created.agent_id, currency: "INR", reserved: 1_000_000, ttl_seconds: 86_400 });
    return (tool: string, args: Record<string, unknown>): Promise<ToolResult> => b.gate.callTool(created.token, tool, args);
  };
  const providerRequests = () => b.simulator!.simulator.state.apiRequests();
  return { agent, providerRequests };
}
