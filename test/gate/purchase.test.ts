// A full purchase over real loopback HTTP: the MCP SDK client → /mcp → the Razorpay client →
// the mounted simulator → checkout → capture → signed webhook → block spent; the log verifies.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bufferLines, exportLog, verifyExportLines } from "../../src/evidence/index.js";
import { payOrder, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;

describe("a full purchase over HTTP", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await testServer();
  });
  afterAll(async () => server.close());

  it("create_order → pay → capture_payment → webhook leaves the block spent, and the exported log verifies with each step in it", async () => {
    const agent = await server.agent();
    const client = await server.client(agent.token);
    const tools = await client.listTools();
    expect(tools.tools.map((tool) => tool.name).sort()).toEqual(
      ["capture_payment", "create_order", "fetch_order", "fetch_order_payments", "fetch_payment", "get_approval", "get_block"].sort(),
    );
    const created = await client.callTool({ name: "create_order", arguments: { amount: 25_000, currency: "INR", receipt: "cart-7" } });
    const structured = created.structuredContent as Structured;
    expect(structured.effect).toBe("ALLOW");
    const order = structured.order as { id: string };
    const paid = await payOrder(server.url, order.id);
    // As an agent written for Razorpay's MCP server finds the payment to capture.
    const listed = await client.callTool({ name: "fetch_order_payments", arguments: { order_id: order.id } });
    expect(listed.structuredContent).toEqual({ order_id: order.id, count: 1, payments: [{ id: paid, order_id: order.id, amount: 25_000, currency: "INR", status: "authorized" }] });
    const payment_id = (listed.structuredContent as { payments: Array<{ id: string }> }).payments[0]!.id;
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 25_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    await server.started.simulator?.deliverWebhooksNow();
    const block = await server.api("GET", `/api/v1/blocks/${agent.block_id}`);
    expect(block.body).toMatchObject({ spent: 25_000, held: 0, available: 975_000 });
    const fetched = await client.callTool({ name: "fetch_payment", arguments: { payment_id } });
    expect(fetched.structuredContent).toMatchObject({ payment: { status: "captured" } });

    // The log as `bursar export` writes it (a checkpoint cut at the head first, so the export
    // ends on a signed root), verified offline against what the server publishes: its verifier
    // key and its latest signed checkpoint. Every receipt signature is checked too.
    await server.started.bursar.log.checkpoint();
    const checkpoint = await (await fetch(`${server.url}/api/v1/log/checkpoint`)).text();
    const key = (await (await fetch(`${server.url}/.well-known/bursar/log-key`)).text()).trim();
    const size = Number(checkpoint.split("\n")[1]);
    const chunks: string[] = [];
    await exportLog(server.started.bursar.driver, { size, exported_at: new Date().toISOString(), write: async (text) => void chunks.push(text) });
    const exported = Buffer.from(chunks.join(""));
    const report = verifyExportLines(bufferLines(exported), { checkpoint, key, allReceipts: true });
    expect(report.failure).toBeUndefined();
    expect(report).toMatchObject({ ok: true, tree_size: size, entries: size });

    // The purchase's steps are among the verified entries: both decisions, the order, the
    // capture's commit, and one entry for each webhook the provider sent about the payment.
    const entries = exported
      .toString("utf8")
      .split("\n")
      .filter((line) => line.startsWith('{"body":'))
      .map((line) => JSON.parse(line) as { kind: string; body: Record<string, unknown> });
    const reservation_id = structured.reservation_id as string;
    const step = (kind: string, body: Record<string, unknown>) => expect.objectContaining({ kind, body: expect.objectContaining(body) });
    expect(entries).toContainEqual(step("gate.decision", { tool: "create_order", reservation_id, verdict: expect.objectContaining({ effect: "ALLOW" }) }));
    expect(entries).toContainEqual(step("gate.settlement", { action: "order.ok", reservation_id, block_id: agent.block_id, order: expect.objectContaining({ id: order.id, amount: 25_000 }) }));
    expect(entries).toContainEqual(step("gate.decision", { tool: "capture_payment", args: expect.objectContaining({ payment_id }), verdict: expect.objectContaining({ effect: "ALLOW" }) }));
    expect(entries).toContainEqual(
      step("gate.settlement", { action: "commit", via: "capture", reservation_id, payment: expect.objectContaining({ id: payment_id, status: "captured", amount: 25_000 }) }),
    );
    const webhooks = server.started.simulator!.state.outbox().filter((entry) => entry.body.includes(payment_id));
    expect(webhooks.map((entry) => entry.event).sort()).toEqual(["order.paid", "payment.authorized", "payment.captured"]);
    for (const { event, event_id } of webhooks) {
      expect(entries.filter((entry) => entry.kind === "gate.settlement" && entry.body.event_id === event_id), event).toHaveLength(1);
    }
  });

  it("/metrics counts decisions by effect and rule, provider, ledger step and WAL flush latency and webhook outcomes", async () => {
    const agent = await server.agent("metrics", { per_call_cap: 1_000 });
    const client = await server.client(agent.token);
    const allowed = await client.callTool({ name: "create_order", arguments: { amount: 500, currency: "INR" } });
    await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
    // A webhook of its own (run alone, no earlier test's counts it): paying the allowed order
    // sends payment.authorized, which moves no money.
    await payOrder(server.url, ((allowed.structuredContent as Structured).order as { id: string }).id);
    await server.started.simulator!.deliverWebhooksNow();
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/bursar_decisions_total\{tool="create_order",effect="ALLOW",rule="ALLOW"\} [1-9]/);
    expect(text).toMatch(/bursar_decisions_total\{tool="create_order",effect="BLOCK",rule="R5"\} 1/);
    expect(text).toMatch(/bursar_provider_request_seconds_count\{operation="create_order",outcome="ok"\} [1-9]/);
    expect(text).toMatch(/bursar_ledger_step_seconds_count\{tool="create_order",step="decide"\} [2-9]/);
    expect(text).toMatch(/bursar_ledger_step_seconds_count\{tool="create_order",step="complete"\} [1-9]/);
    expect(text).toMatch(/^bursar_sqlite_wal_flush_seconds_count [1-9]/m);
    expect(text).toMatch(/bursar_webhooks_total\{outcome="noop"\} [1-9]/);
  });
});
