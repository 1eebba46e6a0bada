// A full purchase over real loopback HTTP: the MCP SDK client → /mcp → the Razorpay client →
// the mounted simulator → checkout → capture → signed webhook → block spent; the log verifies.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payOrder, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;

describe("a full purchase over HTTP", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer();
  });
  afterAll(async () => server.close());

  it("create_order → pay → capture_payment → webhook leaves the block spent", async () => {
    const agent = await server.agent();
    const client = await server.client(agent.token);
    const tools = await client.listTools();
    expect(tools.tools.map((tool) => tool.name).sort()).toEqual(
      ["capture_payment", "create_order", "fetch_order", "fetch_payment", "get_approval", "get_block"].sort(),
    );
    const created = await client.callTool({ name: "create_order", arguments: { amount: 25_000, currency: "INR", receipt: "cart-7" } });
    const structured = created.structuredContent as Structured;
    expect(structured.effect).toBe("ALLOW");
    const order = structured.order as { id: string };
    const payment_id = await payOrder(server.url, order.id);
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 25_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    await server.started.simulator?.deliverWebhooksNow();
    const block = await server.api("GET", `/api/v1/blocks/${agent.block_id}`);
    expect(block.body).toMatchObject({ spent: 25_000, held: 0, available: 975_000 });
    const fetched = await client.callTool({ name: "fetch_payment", arguments: { payment_id } });
    expect(fetched.structuredContent).toMatchObject({ payment: { status: "captured" } });
  });

  it("/metrics counts decisions by effect and rule, provider, ledger step and WAL flush latency and webhook outcomes", async () => {
    const agent = await server.agent("metrics", { per_call_cap: 1_000 });
    const client = await server.client(agent.token);
    await client.callTool({ name: "create_order", arguments: { amount: 500, currency: "INR" } });
    await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/bursar_decisions_total\{tool="create_order",effect="ALLOW",rule="ALLOW"\} [1-9]/);
    expect(text).toMatch(/bursar_decisions_total\{tool="create_order",effect="BLOCK",rule="R5"\} 1/);
    expect(text).toMatch(/bursar_provider_request_seconds_count\{operation="create_order",outcome="ok"\} [1-9]/);
    expect(text).toMatch(/bursar_ledger_step_seconds_count\{tool="create_order",step="decide"\} [2-9]/);
    expect(text).toMatch(/bursar_ledger_step_seconds_count\{tool="create_order",step="complete"\} [1-9]/);
    expect(text).toMatch(/^bursar_sqlite_wal_flush_seconds_count [1-9]/m);
    expect(text).toMatch(/bursar_webhooks_total\{outcome="(applied|noop)"\} [1-9]/);
  });
});
