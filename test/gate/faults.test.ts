// Provider faults over real HTTP: unknown outcomes keep the hold and reach the operator inbox,
// only a proven refusal releases, a capture error re-fetches, and the reservation check settles
// only a capture the provider proves. A lookup with no answer about the order or payment (rate
// limited, a 5xx) is unknown, not "no such order": a payment.captured webhook that needed it is
// not consumed (503, delivered again), the check says "unknown", a capture's pre-fetch says to
// repeat the call.

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { paidOrder, payOrder, testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;
let server: TestServer;

beforeAll(async () => {
  server = await testServer({ BURSAR_PROVIDER_TIMEOUT_MS: "300" });
});
afterEach(() => server.started.simulator?.faults.reset());
afterAll(async () => server.close());

async function buyer(name: string) {
  const agent = await server.agent(name);
  return { agent, client: await server.client(agent.token) };
}

const faults = () => server.started.simulator!.faults;
/** A capture at the provider with the merchant's key, not through the gate (as its dashboard does). */
const captureAtProvider = (payment_id: string, amount: number) =>
  server.started.bursar.gate.gateContext.provider.capturePayment(payment_id, { amount, currency: "INR" });
/** The actions of the agent's abandoned captures' settlement entries, oldest first. */
async function abandonedCaptures(agent_id: string): Promise<string[]> {
  const log = server.started.bursar.log;
  const entries = await log.entries(0, await log.treeSize());
  const reservations = new Set(entries.flatMap(({ entry }) => (entry.kind === "gate.decision" && entry.body.agent_id === agent_id ? [entry.body.reservation_id] : [])));
  return entries.flatMap(({ entry }) => {
    const action = String(entry.body.action);
    return entry.kind === "gate.settlement" && action.startsWith("capture.") && reservations.has(entry.body.reservation_id) ? [action] : [];
  });
}
const block = async (block_id: string) => (await server.api<Record<string, number>>("GET", `/api/v1/blocks/${block_id}`)).body;
/** The inbox's outcome-unknown reservations. */
const unknownOutcomes = async () => (await server.api<{ unknown_outcomes: Array<{ reservation_id: string; unknown_reason: string }> }>("GET", "/api/v1/inbox")).body.unknown_outcomes;
/** The inbox's outcome-unknown reservation ids. */
const unknownIds = async () => (await unknownOutcomes()).map((row) => row.reservation_id);
/** A capture of `payment_id` (9,000 INR) whose request gets the fault `fault` from the provider. */
async function captureWith(client: Awaited<ReturnType<typeof buyer>>["client"], payment_id: string, fault: "error_5xx_next" | "error_4xx_next") {
  faults().set({ [fault]: 1, only_routes: ["POST /v1/payments/:id/capture"] });
  return client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
}

describe("provider faults", () => {
  for (const fault of ["timeout_next", "reset_next", "error_5xx_next"] as const) {
    it(`${fault} on order creation keeps the hold as outcome-unknown and shows it in the inbox`, async () => {
      const { agent, client } = await buyer(`f-${fault}`);
      faults().set({ [fault]: 1, only_routes: ["POST /v1/orders"] });
      const result = await client.callTool({ name: "create_order", arguments: { amount: 7_000, currency: "INR" } });
      expect(result.isError).toBe(true);
      const structured = result.structuredContent as Structured;
      expect(structured).toMatchObject({ effect: "ALLOW", provider: "unknown" });
      expect(await block(agent.block_id)).toMatchObject({ held: 7_000, spent: 0 });
      expect(await unknownIds()).toContain(structured.reservation_id);
      // The same call replays the unknown state instead of creating a second order.
      const again = await client.callTool({ name: "create_order", arguments: { amount: 7_000, currency: "INR" } });
      expect(again.structuredContent).toMatchObject({ provider: "unknown", replayed: true, reservation_id: structured.reservation_id });
    });
  }

  it("a 4xx refusal of order creation releases the hold and is not stored under the key", async () => {
    const { agent, client } = await buyer("f-4xx");
    faults().set({ error_4xx_next: 1, only_routes: ["POST /v1/orders"] });
    const args = { amount: 7_000, currency: "INR", idempotency_key: "refused-once" };
    const result = await client.callTool({ name: "create_order", arguments: args });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ effect: "ALLOW", provider: "refused" });
    // The provider's text ends in a full stop of its own: one, not two.
    expect((result.content as Array<{ text: string }>)[0]?.text).toBe("REFUSED by the provider: The request was refused by the simulator's error_4xx fault. Nothing was charged.");
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 0 });
    const retried = await client.callTool({ name: "create_order", arguments: args });
    expect(retried.structuredContent).toMatchObject({ effect: "ALLOW", order: { amount: 7_000 } });
    expect(await block(agent.block_id)).toMatchObject({ held: 7_000 });
  });

  it("a capture whose answer is lost is settled from the re-fetched payment", async () => {
    const { agent, client } = await buyer("f-capture-reset");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    faults().set({ reset_next: 1, after_processing: true, only_routes: ["POST /v1/payments/:id/capture"] });
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 9_000 });
  });

  it("a capture that failed before it took effect leaves the money held and the agent may retry", async () => {
    const { agent, client } = await buyer("f-capture-5xx");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    faults().set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
    const failed = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(failed.isError).toBe(true);
    expect(failed.structuredContent).toMatchObject({ provider: "refused", error: { code: "capture_failed" } });
    // Not "refused by the provider", nor "nothing was charged" for good: a 5xx capture may still land.
    expect((failed.content as Array<{ text: string }>)[0]?.text).toMatch(/^NOT CAPTURED: the capture got no definite answer \(HTTP 5\d\d.*may still land/);
    expect(await block(agent.block_id)).toMatchObject({ held: 9_000, spent: 0 });
    // The evidence says the same: no answer, not a refusal; its entry names the block and payment.
    expect(await abandonedCaptures(agent.agent_id)).toEqual(["capture.unanswered"]);
    const log = server.started.bursar.log;
    const entries = await log.entries(0, await log.treeSize());
    const unanswered = entries.find(({ entry }) => entry.body.action === "capture.unanswered" && entry.body.payment_id === payment_id);
    expect(unanswered?.entry.body).toMatchObject({ block_id: agent.block_id, payment_id });
    const retried = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(retried.structuredContent).toMatchObject({ effect: "ALLOW", payment: { status: "captured" } });
  });

  it("a capture that landed after the gate gave up on it, its webhooks lost, is settled when the agent repeats the capture", async () => {
    const { agent, client } = await buyer("f-capture-late");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    faults().set({ error_5xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
    const failed = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(failed.structuredContent).toMatchObject({ provider: "refused", error: { code: "capture_failed" } });
    // The capture lands at the provider after all, and every webhook about it is lost.
    faults().set({ webhook_drop_next: 10 });
    expect((await captureAtProvider(payment_id, 9_000)).kind).toBe("ok");
    expect(await block(agent.block_id)).toMatchObject({ held: 9_000, spent: 0 });
    const repeated = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    // It was refused as "captured, not authorized" and the money stayed held, with nothing in the inbox.
    expect(repeated.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R3", reason: "the reservation is already committed" });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 9_000, unreconciled: 0, frozen: false });
    const log = server.started.bursar.log;
    const commits = (await log.entries(0, await log.treeSize())).filter(
      ({ entry }) => entry.kind === "gate.settlement" && entry.body.action === "commit" && (entry.body.payment as { id: string }).id === payment_id,
    );
    expect(commits.map(({ entry }) => entry.body.via)).toEqual(["capture"]);
  });

  it("a capture with no definite answer puts its reservation in the inbox; landed later with its webhooks lost, a check settles it and it leaves the inbox", async () => {
    const { agent, client } = await buyer("f-capture-inbox");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    const failed = await captureWith(client, payment_id, "error_5xx_next");
    const { reservation_id } = failed.structuredContent as { reservation_id: string };
    const unknown = async () => (await unknownOutcomes()).filter((row) => row.reservation_id === reservation_id);
    // Without this, nothing but the agent's next capture would ever settle it.
    expect(await unknown()).toEqual([expect.objectContaining({ unknown_reason: expect.stringMatching(new RegExp(`^the capture of payment ${payment_id} got no definite answer and may still land`)) })]);
    faults().set({ webhook_drop_next: 10 });
    expect((await captureAtProvider(payment_id, 9_000)).kind).toBe("ok");
    const checked = await server.api<Structured>("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(checked.body).toMatchObject({ outcome: "applied", payment: { id: payment_id } });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 9_000 });
    expect(await unknown()).toEqual([]);
  });

  it("after a capture with no definite answer, a later capture the provider refuses leaves the payment bound: the first may still land", async () => {
    const { agent, client } = await buyer("f-capture-5xx-then-4xx");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    const unanswered = await captureWith(client, payment_id, "error_5xx_next");
    const { reservation_id } = unanswered.structuredContent as { reservation_id: string };
    const refused = await captureWith(client, payment_id, "error_4xx_next");
    expect(refused.structuredContent).toMatchObject({ provider: "refused" });
    const log = server.started.bursar.log;
    const entries = await log.entries(0, await log.treeSize());
    const abandoned = entries.filter(({ entry }) => entry.kind === "gate.settlement" && entry.body.reservation_id === reservation_id && String(entry.body.action).startsWith("capture."));
    expect(abandoned.map(({ entry }) => [entry.body.action, entry.body.payment_unbound])).toEqual([
      ["capture.unanswered", false],
      ["capture.refused", false],
    ]);
    expect(await unknownIds()).toContain(reservation_id);
    // Still bound: the same payment captures, and settles once.
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 9_000 });
  });

  it("a capture the provider refused (4xx) is recorded as refused, and its reservation stays out of the inbox", async () => {
    const { agent, client } = await buyer("f-capture-4xx");
    const { payment_id } = await paidOrder(server.url, client, { amount: 9_000, currency: "INR" });
    faults().set({ error_4xx_next: 1, only_routes: ["POST /v1/payments/:id/capture"] });
    const refused = await client.callTool({ name: "capture_payment", arguments: { payment_id, amount: 9_000, currency: "INR" } });
    expect(refused.structuredContent).toMatchObject({ provider: "refused" });
    expect((refused.content as Array<{ text: string }>)[0]?.text).not.toMatch(/no definite answer/);
    expect(await abandonedCaptures(agent.agent_id)).toEqual(["capture.refused"]);
    expect(await unknownIds()).not.toContain((refused.structuredContent as Structured).reservation_id);
  });

  it("the reservation check finds a timed-out order by receipt and settles only a proven capture", async () => {
    const { agent, client } = await buyer("f-check");
    faults().set({ timeout_next: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
    const result = await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
    const reservation_id = (result.structuredContent as Structured).reservation_id as string;
    expect(result.structuredContent).toMatchObject({ provider: "unknown" });
    faults().reset();

    // The order exists at the provider. Paid but not captured: the check must not settle.
    const order = server.started.simulator!.state.orders().find((row) => row.receipt === reservation_id) as { id: string };
    expect(order).toBeDefined();
    faults().set({ webhook_drop_next: 10 });
    const payment_id = await payOrder(server.url, order.id);
    const first = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(first.body).toMatchObject({ outcome: "no_capture", order_id: order.id });
    // A check that changed nothing is still evidenced: what the provider answered, and when.
    const log = server.started.bursar.log;
    const [asked] = await log.entries((await log.treeSize()) - 1, await log.treeSize());
    expect(asked!.entry).toMatchObject({
      kind: "gate.operator",
      body: { action: "reservation.check", reservation_id, block_id: agent.block_id, order_id: order.id, outcome: "no_capture", payments: [{ id: payment_id, status: "authorized" }] },
    });
    expect(await block(agent.block_id)).toMatchObject({ held: 5_000, spent: 0 });

    // Captured out of band at the provider (its dashboard): the check settles what it proves.
    expect(await captureAtProvider(payment_id, 5_000)).toMatchObject({ kind: "ok" });
    const second = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(second.body).toMatchObject({ outcome: "applied", payment: { id: payment_id } });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 5_000 });
    const third = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(third.body).toMatchObject({ outcome: "noop" });
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 5_000 });
  });

  it("duplicate and out-of-order webhook deliveries apply once", async () => {
    const { agent, client } = await buyer("f-webhooks");
    const { payment_id } = await paidOrder(server.url, client, { amount: 4_000, currency: "INR" });
    const log_size = async () => (await server.api<{ tree_size: number }>("GET", "/api/v1/log/entries?start=0&end=0")).body.tree_size;
    await server.started.simulator!.deliverWebhooksNow(); // payment.authorized, before the knobs
    const log_start = await log_size();
    // Capture at the provider directly, so only the webhooks can settle it.
    faults().set({ webhook_duplicate_next: 3, webhook_out_of_order_next: 1 });
    expect(await captureAtProvider(payment_id, 4_000)).toMatchObject({ kind: "ok" });
    await server.started.simulator!.deliverWebhooksNow();
    await server.started.simulator!.deliverWebhooksNow();
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 4_000 });

    // The knobs struck: the capture's two events each went out twice, same event id and bytes.
    const sent = server.started.simulator!.state.outbox().filter((entry) => entry.body.includes(payment_id) && entry.event !== "payment.authorized");
    expect(sent.map((entry) => [entry.event, entry.delivered_count])).toEqual([
      ["payment.captured", 2],
      ["order.paid", 2],
    ]);
    // And the gate received every delivery, in this order (every webhook writes one entry): the
    // held-back payment.captured arrived after order.paid, which settled the payment; each
    // event's second copy was answered as a duplicate; the late payment.captured moved nothing.
    const ids = new Set(sent.map((entry) => entry.event_id));
    const page = await server.api<{ entries: Array<{ entry: { body: { action?: string; event?: string; event_id?: string } } }> }>(
      "GET",
      `/api/v1/log/entries?start=${log_start}&end=${await log_size()}`,
    );
    const webhook_entries = page.body.entries.filter(({ entry }) => ids.has(entry.body.event_id ?? "")).map(({ entry }) => [entry.body.event, entry.body.action]);
    expect(webhook_entries).toEqual([
      ["order.paid", "commit"],
      ["order.paid", "webhook.duplicate"],
      ["payment.captured", "webhook.noop"],
      ["payment.captured", "webhook.duplicate"],
    ]);
  });
});

/** An order the provider created whose answer the gate never got: its reservation awaits the order. */
async function lostOrder(name: string, amount: number) {
  const { agent, client } = await buyer(name);
  faults().set({ error_5xx_next: 1, after_processing: true, only_routes: ["POST /v1/orders"] });
  const created = await client.callTool({ name: "create_order", arguments: { amount, currency: "INR" } });
  faults().reset();
  expect(created.structuredContent).toMatchObject({ effect: "ALLOW", provider: "unknown" });
  const reservation_id = (created.structuredContent as Structured).reservation_id as string;
  const order = server.started.simulator!.state.orders().find((row) => row.receipt === reservation_id) as { id: string } | undefined;
  if (!order) throw new Error("the simulator did not create the order");
  return { agent, client, reservation_id, order_id: order.id };
}

describe("provider lookups without an answer", () => {
  it("a rate-limited order lookup leaves a payment.captured webhook unconsumed (503), and its redelivery settles", async () => {
    const { agent, order_id } = await lostOrder("lk-webhook", 10_000);
    // Only payment.captured is let through: order.paid names the receipt itself and needs no lookup.
    faults().set({ webhook_drop_next: 100 });
    const payment_id = await payOrder(server.url, order_id);
    expect(await captureAtProvider(payment_id, 10_000)).toMatchObject({ kind: "ok" });
    const event = server.started.simulator!.state.outbox().find((entry) => entry.event === "payment.captured" && entry.body.includes(payment_id));
    if (!event) throw new Error("the simulator emitted no payment.captured");
    faults().set({ webhook_drop_next: 0, rate_limit_next: 1_000, only_routes: ["GET /v1/orders/:id"] });
    server.started.simulator!.redeliverWebhook(event.event_id);
    await server.started.simulator!.deliverWebhooksNow();
    const attempts = server.started.simulator!.state.outbox().filter((entry) => entry.event_id === event.event_id).flatMap((entry) => entry.attempts);
    expect(attempts.map((attempt) => attempt.status)).toContain(503);
    expect(await block(agent.block_id)).toMatchObject({ held: 10_000, spent: 0 });
    faults().reset();
    await server.started.simulator!.deliverWebhooksNow();
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 10_000 });
  });

  for (const fault of ["rate_limit_next", "error_5xx_next"] as const) {
    it(`the reservation check says "unknown", not "not_found", when the receipt lookup gets ${fault}`, async () => {
      const { reservation_id, order_id } = await lostOrder(`lk-check-${fault}`, 5_000);
      faults().set({ [fault]: 1, only_routes: ["GET /v1/orders"] });
      const checked = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
      expect(checked.body).toMatchObject({ outcome: "unknown" });
      const answered = await server.api("POST", `/api/v1/reservations/${reservation_id}/check`);
      expect(answered.body).toMatchObject({ outcome: "no_capture", order_id });
    });
  }

  it("a rate-limited payment pre-fetch refuses the capture under R3 and says to repeat the same call", async () => {
    const { client } = await buyer("lk-capture");
    const { payment_id } = await paidOrder(server.url, client, { amount: 8_000, currency: "INR" });
    faults().set({ rate_limit_next: 1, only_routes: ["GET /v1/payments/:id"] });
    const args = { payment_id, amount: 8_000, currency: "INR", idempotency_key: "cap-1" };
    const refused = await client.callTool({ name: "capture_payment", arguments: args });
    expect(refused.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R3" });
    expect((refused.content as Array<{ text: string }>)[0]?.text).toContain("Repeat this same call, with the same idempotency_key");
    const repeated = await client.callTool({ name: "capture_payment", arguments: args });
    expect(repeated.structuredContent).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
  });
});
