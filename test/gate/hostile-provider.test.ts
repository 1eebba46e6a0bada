// `bursar serve` with BURSAR_PROVIDER=razorpay pointed at a broken or hostile provider (a real
// loopback server, see startScriptedProvider): whatever text it answers with, a proven refusal
// still releases its hold with evidence, and an answer about another order reaches no agent.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { key_id, key_secret, startScriptedProvider, webhook_secret, wireOrder, type ScriptedProvider } from "../provider/support.js";
import { testServer, type TestServer } from "../support/server.js";

let refuse = false;
let created = 0;
let upstream: ScriptedProvider;
let server: TestServer;

beforeAll(async () => {
  upstream = await startScriptedProvider((method, path, body) => {
    if (method === "POST" && path === "/v1/orders") {
      if (refuse) return { status: 400, json: '{"error":{"code":"BAD_REQUEST_ERROR","description":"refused \\ud800 here","field":"amount"}}' };
      const { amount, receipt } = body as { amount: number; receipt: string };
      return { status: 200, json: JSON.stringify(wireOrder({ id: `order_Mine${++created}`, amount, receipt })) };
    }
    // Asked for any order by id, it answers with someone else's, notes and all.
    return { status: 200, json: JSON.stringify(wireOrder({ id: "order_Foreign1", amount: 9_000, receipt: "res_foreign", notes: { ship_to: "someone else's address" } })) };
  });
  server = await testServer({
    BURSAR_PROVIDER: "razorpay",
    RAZORPAY_KEY_ID: key_id,
    RAZORPAY_KEY_SECRET: key_secret,
    RAZORPAY_WEBHOOK_SECRET: webhook_secret,
    RAZORPAY_BASE_URL: upstream.base_url,
  });
});

afterAll(async () => {
  await server.close();
  await upstream.close();
});

describe("a hostile provider", () => {
  it("refusing an order with a lone surrogate in its text: the refusal releases the hold, with evidence", async () => {
    refuse = true;
    const agent = await server.agent("refused");
    const client = await server.client(agent.token);
    const result = await client.callTool({ name: "create_order", arguments: { amount: 1_227, currency: "INR" } });
    refuse = false;
    expect(result.structuredContent).toMatchObject({ effect: "ALLOW", provider: "refused", error: { description: "refused \ufffd here" } });
    const block = await client.callTool({ name: "get_block", arguments: {} });
    expect(block.structuredContent).toMatchObject({ held: 0, spent: 0 });
  });

  it("answering a fetch_order with another order: the agent is not shown it", async () => {
    const agent = await server.agent("reader");
    const client = await server.client(agent.token);
    const order = await client.callTool({ name: "create_order", arguments: { amount: 500, currency: "INR" } });
    const order_id = (order.structuredContent as { order: { id: string } }).order.id;
    const fetched = await client.callTool({ name: "fetch_order", arguments: { order_id } });
    expect(JSON.stringify(fetched)).not.toContain("someone else's address");
    expect(JSON.stringify(fetched)).toContain("the provider answered about order order_Foreign1");
  });
});
