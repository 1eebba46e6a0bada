// /metrics tells the truth about what needs the operator and about webhooks it refused: holds
// left outcome-unknown by an approved HOLD count as an agent's do, the inbox gauge holds what
// GET /api/v1/inbox holds, refused deliveries are counted by status, and a tool name an agent
// makes up never becomes a label value.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Inbox } from "../../src/ledger/index.js";
import { signWebhookBody } from "../../src/provider/razorpay/index.js";
import { webhook_body_max_bytes } from "../../src/provider/razorpay/webhook.js";
import { createMetrics, inbox_read_interval_ms, inbox_read_timeout_ms } from "../../src/server/metrics.js";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

/** The value of one series in /metrics, or undefined when it is not there. */
async function series(name: string): Promise<number | undefined> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/** A HOLD of 15,000 on a block whose approval threshold is 10,000: its approval id. */
async function held(name: string): Promise<string> {
  const agent = await server.agent(name, { approval_threshold: 10_000 });
  const client = await server.client(agent.token);
  const result = await client.callTool({ name: "create_order", arguments: { amount: 15_000, currency: "INR" } });
  const structured = result.structuredContent as { effect: string; approval_id: string };
  expect(structured.effect).toBe("HOLD");
  return structured.approval_id;
}

describe("/metrics and what needs the operator", () => {
  it("counts an agent's order and an approved HOLD whose outcome is unknown, once each, and bursar_inbox_items holds what the inbox holds", async () => {
    const unknown_before = (await series('bursar_unknown_outcomes_total{tool="create_order"}')) ?? 0;
    const approved = await held("metrics-approved");
    await held("metrics-pending");
    // The order is made, but its answer is lost: the hold stays, its outcome unknown.
    const answerLost = () => server.started.simulator!.faults.set({ error_5xx_next: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
    answerLost();
    const approve = await server.api<{ result: Record<string, unknown> }>("POST", `/api/v1/approvals/${approved}/approve`);
    expect(approve.body.result).toMatchObject({ provider: "unknown" });
    expect(await series('bursar_unknown_outcomes_total{tool="create_order"}')).toBe(unknown_before + 1);
    const agent = await server.agent("metrics-unknown");
    const client = await server.client(agent.token);
    answerLost();
    const created = await client.callTool({ name: "create_order", arguments: { amount: 1_000, currency: "INR" } });
    server.started.simulator!.faults.reset();
    expect(created.structuredContent).toMatchObject({ provider: "unknown" });
    expect(await series('bursar_unknown_outcomes_total{tool="create_order"}')).toBe(unknown_before + 2);

    // Read after the last scrape's figures have aged out: the gauge reads the database afresh.
    await new Promise((resolve) => setTimeout(resolve, inbox_read_interval_ms));
    const inbox = (await server.api<Inbox>("GET", "/api/v1/inbox")).body;
    expect(inbox.unknown_outcomes_total).toBeGreaterThanOrEqual(1);
    expect(inbox.pending_approvals_total).toBeGreaterThanOrEqual(1);
    expect(await series('bursar_inbox_items{list="unknown_outcomes"}')).toBe(inbox.unknown_outcomes_total);
    expect(await series('bursar_inbox_items{list="pending_approvals"}')).toBe(inbox.pending_approvals_total);
    expect(await series('bursar_inbox_items{list="frozen_blocks"}')).toBe(inbox.frozen_blocks_total);
  });

  it("answers a scrape without the inbox gauge when the database fails or is late, and asks it at most once a second", async () => {
    // A read that never answers (a database stalled): each scrape waits inbox_read_timeout_ms at most.
    // A read that fails: its failure stands for the interval, as a figure would.
    for (const [read, scrapes] of [
      [() => new Promise<never>(() => undefined), 1],
      [() => Promise.reject(new Error("the database went away")), 3],
    ] as const) {
      const metrics = createMetrics();
      let reads = 0;
      metrics.watchInbox(() => {
        reads += 1;
        return read();
      });
      for (let scrape = 0; scrape < scrapes; scrape++) {
        const text = await metrics.registry.metrics();
        expect(text).toContain("bursar_decisions_total");
        expect(text).not.toMatch(/^bursar_inbox_items\{/m);
      }
      expect(reads).toBe(1);
    }
  }, inbox_read_timeout_ms + 5_000);

  it("counts webhook deliveries it refused, by status, whatever refused them", async () => {
    const before = async (status: number) => (await series(`bursar_webhooks_rejected_total{status="${status}"}`)) ?? 0;
    const [before_400, before_401, before_413] = [await before(400), await before(401), await before(413)];
    const secret = readFileSync(join(server.dir, "webhook-secret"), "utf8").trim();
    const post = async (body: string, headers: Record<string, string>) =>
      (await fetch(`${server.url}/webhooks/razorpay`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })).status;
    const event = JSON.stringify({ entity: "event", event: "payment.authorized", contains: [], payload: {}, created_at: 1_790_000_000 });
    expect(await post(event, { "x-razorpay-signature": "0".repeat(64), "x-razorpay-event-id": "evt_MetricsForged" })).toBe(401);
    expect(await post(event, { "x-razorpay-signature": signWebhookBody(secret, event) })).toBe(400);
    expect(await post("x".repeat(webhook_body_max_bytes + 1), { "x-razorpay-signature": "0".repeat(64) })).toBe(413);
    expect(await series('bursar_webhooks_rejected_total{status="401"}')).toBe(before_401 + 1);
    expect(await series('bursar_webhooks_rejected_total{status="400"}')).toBe(before_400 + 1);
    expect(await series('bursar_webhooks_rejected_total{status="413"}')).toBe(before_413 + 1);
  });

  it("labels a tool an agent made up as (undeclared), never by its name", async () => {
    const agent = await server.agent("metrics-undeclared");
    const client = await server.client(agent.token);
    await client.callTool({ name: "transfer_funds_metrics", arguments: { amount: 1 } });
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).not.toContain("transfer_funds_metrics");
    expect(text).toMatch(/bursar_decisions_total\{tool="\(undeclared\)",effect="BLOCK",rule="ALLOWLIST"\} [1-9]/);
  });
});
