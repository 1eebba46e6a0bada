// A provider that answers about the wrong order, over real loopback HTTP against the mounted
// simulator (the Provider port wrapped for one answer): an order id another reservation already
// has is never named on a second one (the answer is recorded and the reservation goes to the
// inbox saying why, for create_order, an approval and an operator check alike); a capture on an
// order whose receipt names a reservation that has another order is a conflict there, not a
// no-op; and a payment.failed for a payment committed as captured is recorded as the stale report
// it is (a late-authorized payment fails first), not as "no money moved", and freezes nothing.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { order_taken_told } from "../../src/ledger/complete.js";
import type { ProviderOrder } from "../../src/provider/port.js";
import { signWebhookBody } from "../../src/provider/razorpay/index.js";
import { paidOrder, testServer, type TestServer } from "../support/server.js";

let server: TestServer;
let secret: string;
let counter = 0;

beforeAll(async () => {
  server = await testServer();
  secret = readFileSync(join(server.dir, "webhook-secret"), "utf8").trim();
});
afterAll(async () => server.close());

type Structured = Record<string, unknown> & { reservation_id?: string; order?: { id: string }; provider?: string; reason?: string };

async function buyer(block: Record<string, unknown> = {}): Promise<{ agent: { agent_id: string; block_id: string }; client: Client }> {
  const agent = await server.agent(`buyer-${++counter}`, block);
  return { agent, client: await server.client(agent.token) };
}

async function createOrder(client: Client, args: Record<string, unknown>): Promise<Structured> {
  return (await client.callTool({ name: "create_order", arguments: args })).structuredContent as Structured;
}

/** Another agent's order, made through the gate: its id and reservation. */
async function someoneElsesOrder(): Promise<{ order_id: string; reservation_id: string }> {
  const { client } = await buyer();
  const made = await createOrder(client, { amount: 1_000, currency: "INR" });
  return { order_id: made.order!.id, reservation_id: made.reservation_id! };
}

/** The provider's next answer to create_order is about `rewrite`'s order (the real order is made). */
function answerNextOrderWith(rewrite: (order: ProviderOrder) => ProviderOrder): void {
  const provider = server.started.bursar.gate.provider;
  const real = provider.createOrder;
  provider.createOrder = async (input) => {
    provider.createOrder = real;
    const outcome = await real.call(provider, input);
    return outcome.kind === "ok" ? { ...outcome, value: rewrite(outcome.value) } : outcome;
  };
}

const reservation = (reservation_id: string) => server.started.bursar.ledger.reservation(reservation_id);
const block = async (block_id: string) => (await server.api<Record<string, unknown>>("GET", `/api/v1/blocks/${block_id}`)).body;

async function inboxReason(reservation_id: string): Promise<unknown> {
  const inbox = await server.api<{ unknown_outcomes: Array<{ reservation_id: string; unknown_reason: string | null }> }>("GET", "/api/v1/inbox");
  return inbox.body.unknown_outcomes.find((row) => row.reservation_id === reservation_id)?.unknown_reason;
}

async function settlementEntries(action: string, reservation_id: string): Promise<Array<Record<string, unknown>>> {
  const log = server.started.bursar.log;
  const entries = await log.entries(0, await log.treeSize());
  return entries.map((stored) => stored.entry.body).filter((body) => body.action === action && body.reservation_id === reservation_id);
}

async function send(event: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = JSON.stringify(event);
  const response = await fetch(`${server.url}/webhooks/razorpay`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-razorpay-signature": signWebhookBody(secret, raw), "x-razorpay-event-id": `evt_Conflict${++counter}` },
    body: raw,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function paymentEntity(payment: { id: string; order_id: string; amount: number; status: string }): Record<string, unknown> {
  return { entity: "payment", currency: "INR", captured: payment.status === "captured", method: "card", created_at: 1_790_000_000, ...payment };
}

function event(name: string, payload: Record<string, unknown>): Record<string, unknown> {
  return { entity: "event", account_id: "acc_Test", event: name, contains: Object.keys(payload), payload, created_at: 1_790_000_000 };
}

describe("a provider answer naming an order another reservation already has", () => {
  it("create_order: not named on the call's reservation; recorded, and in the inbox with a true reason; the key replays unknown", async () => {
    const other = await someoneElsesOrder();
    const { agent, client } = await buyer();
    answerNextOrderWith((order) => ({ ...order, id: other.order_id }));
    const args = { amount: 2_000, currency: "INR", idempotency_key: "taken-1" };
    // Before: a UNIQUE constraint failure, answered as a JSON-RPC internal error.
    const answered = await createOrder(client, args);
    const reservation_id = answered.reservation_id!;
    const reason = `the provider answered with order ${other.order_id}, which reservation ${other.reservation_id} already has`;
    // The agent hears the outcome is unknown, and never sees the other reservation's order or ids.
    expect(answered).toMatchObject({ effect: "ALLOW", provider: "unknown", reason: order_taken_told });
    expect(answered.order).toBeUndefined();
    expect(JSON.stringify(answered)).not.toContain(other.order_id);
    expect(JSON.stringify(answered)).not.toContain(other.reservation_id);
    expect(await inboxReason(reservation_id)).toBe(reason);
    expect(await reservation(reservation_id)).toMatchObject({ status: "held", order_id: null, outcome_unknown: 1 });
    expect(await reservation(other.reservation_id)).toMatchObject({ order_id: other.order_id });
    expect(await settlementEntries("order.taken", reservation_id)).toEqual([
      expect.objectContaining({ provider: "unknown", reason: order_taken_told, taken_reason: reason, taken_by: other.reservation_id, answered: expect.objectContaining({ id: other.order_id, amount: 2_000 }) }),
    ]);
    expect(await block(agent.block_id)).toMatchObject({ held: 2_000, spent: 0 });
    const replayed = await createOrder(client, args);
    expect(replayed).toMatchObject({ provider: "unknown", reservation_id, reason: order_taken_told, replayed: true });
  });

  it("an approved call: the approve answers 200 with the unknown outcome, the approval is decided, the inbox says why", async () => {
    const other = await someoneElsesOrder();
    const { client } = await buyer({ approval_threshold: 1_000 });
    const held = await createOrder(client, { amount: 3_000, currency: "INR" });
    expect(held).toMatchObject({ effect: "HOLD" });
    const approval_id = String(held.approval_id);
    answerNextOrderWith((order) => ({ ...order, id: other.order_id }));
    const approved = await server.api<{ result: Structured }>("POST", `/api/v1/approvals/${approval_id}/approve`);
    expect(approved.status).toBe(200);
    const reason = `the provider answered with order ${other.order_id}, which reservation ${other.reservation_id} already has`;
    expect(approved.body.result).toMatchObject({ provider: "unknown", reason: order_taken_told });
    const reservation_id = approved.body.result.reservation_id!;
    expect(await server.started.bursar.ledger.approval(approval_id)).toMatchObject({ state: "approved" });
    expect(await inboxReason(reservation_id)).toBe(reason);
    expect(await reservation(reservation_id)).toMatchObject({ status: "held", order_id: null });
  });

  it("an operator check whose receipt lookup answers with it: 200, not linked, recorded, the inbox says why", async () => {
    const other = await someoneElsesOrder();
    const { agent, client } = await buyer();
    // The creation takes effect at the provider but its answer is lost (a 5xx).
    server.started.simulator!.faults.set({ error_5xx_next: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
    const lost = await createOrder(client, { amount: 4_000, currency: "INR" });
    server.started.simulator!.faults.reset();
    expect(lost).toMatchObject({ provider: "unknown" });
    const reservation_id = lost.reservation_id!;
    const provider = server.started.bursar.gate.provider;
    const real = provider.findOrdersByReceipt;
    provider.findOrdersByReceipt = async (receipt) => {
      provider.findOrdersByReceipt = real;
      const found = await real.call(provider, receipt);
      return found.kind === "ok" ? { ...found, value: found.value.map((order) => ({ ...order, id: other.order_id })) } : found;
    };
    const checked = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    const reason = `the provider answered with order ${other.order_id}, which reservation ${other.reservation_id} already has`;
    // Not answered with the other reservation's order, nor its payments settled here.
    expect(checked).toMatchObject({ status: 200, body: { outcome: "unknown", reason } });
    expect(checked.body.order_id).toBeUndefined();
    expect(await inboxReason(reservation_id)).toBe(reason);
    expect(await reservation(reservation_id)).toMatchObject({ status: "held", order_id: null });
    expect(await reservation(other.reservation_id)).toMatchObject({ order_id: other.order_id });
    expect(await settlementEntries("order.taken", reservation_id)).toEqual([expect.objectContaining({ order_id: other.order_id, taken_by: other.reservation_id, reason })]);
    expect(await block(agent.block_id)).toMatchObject({ held: 4_000, spent: 0 });
  });
});

describe("webhook conflicts", () => {
  it("a capture on the real order whose receipt names a reservation answered with a decoy id → rejected there: counted, the block frozen", async () => {
    const { agent, client } = await buyer();
    let real_order: ProviderOrder | undefined;
    answerNextOrderWith((order) => {
      real_order = order;
      return { ...order, id: `order_Decoy${counter}` };
    });
    const made = await createOrder(client, { amount: 5_000, currency: "INR" });
    expect(made.order?.id).toBe(`order_Decoy${counter}`);
    const order_id = real_order!.id;
    expect(real_order!.receipt).toBe(made.reservation_id);
    const payment = paymentEntity({ id: `pay_Real${counter}`, order_id, amount: 5_000, status: "captured" });
    const order = { entity: "order", id: order_id, amount: 5_000, amount_paid: 5_000, currency: "INR", receipt: made.reservation_id, status: "paid", notes: [], created_at: 1_790_000_000 };
    // Before: 200 {"outcome":"noop","reason":"no reservation for this order"}, the money forgotten.
    const paid = await send(event("order.paid", { payment: { entity: payment }, order: { entity: order } }));
    expect(paid).toMatchObject({ status: 200, body: { outcome: "rejected", reason: expect.stringContaining(`which has order order_Decoy`) } });
    expect(String(paid.body.reason)).toContain(order_id);
    expect(await block(agent.block_id)).toMatchObject({ frozen: true, unreconciled: 5_000, held: 5_000, spent: 0 });
    // The same capture again under another event id: counted once.
    expect((await send(event("order.paid", { payment: { entity: payment }, order: { entity: order } }))).body).toMatchObject({ outcome: "rejected" });
    expect(await block(agent.block_id)).toMatchObject({ unreconciled: 5_000, held: 5_000, spent: 0 });
    expect(await settlementEntries("reject", made.reservation_id!)).toHaveLength(2);
  });

  it("payment.failed for a payment committed as captured → a stale report, recorded as such: nothing frozen, the spend stands", async () => {
    const { agent, client } = await buyer();
    const { order_id, payment_id } = await paidOrder(server.url, client, { amount: 6_000, currency: "INR" });
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 6_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { status: "captured" } });
    await server.started.bursar.gate.idle();
    expect(await block(agent.block_id)).toMatchObject({ spent: 6_000, frozen: false });
    // Razorpay fails a payment whose bank answers late, then authorizes it (and it is captured),
    // and delivers the failed webhook again for up to a day. Before: "no money moved".
    const failed = await send(event("payment.failed", { payment: { entity: paymentEntity({ id: payment_id, order_id, amount: 6_000, status: "failed" }) } }));
    const reason = expect.stringMatching(new RegExp(`^payment ${payment_id} is committed as captured on reservation res_\\w+: a failed report about it is stale`));
    expect(failed).toMatchObject({ status: 200, body: { outcome: "noop", reason } });
    expect(await block(agent.block_id)).toMatchObject({ frozen: false, spent: 6_000, held: 0, unreconciled: 0 });
  });
});
