// HOLD and human approval over HTTP: the amount is held, approve forwards exactly once
// (a second approve is 409), deny and expiry release, approve re-checks the block (revoked,
// frozen, expired) and the agent before forwarding, and the agent learns the outcome with
// get_approval or by repeating the call.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signWebhookBody } from "../../src/provider/razorpay/index.js";
import { testServer, type TestServer } from "../support/server.js";
import { waitUntil } from "../support/wait.js";

type Structured = Record<string, unknown>;
let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

async function heldCall(name: string, key = "big-1", block: Record<string, unknown> = {}) {
  const agent = await server.agent(name, { approval_threshold: 10_000, ...block });
  const client = await server.client(agent.token);
  const args = { amount: 15_000, currency: "INR", idempotency_key: key };
  const result = await client.callTool({ name: "create_order", arguments: args });
  return { agent, client, args, structured: result.structuredContent as Structured };
}

const block = async (block_id: string) => (await server.api<Record<string, number>>("GET", `/api/v1/blocks/${block_id}`)).body;

type McpClient = Awaited<ReturnType<TestServer["client"]>>;

/** The provider reports a capture of `amount` on the gate's order (signed with the webhook
 *  secret, as the provider signs): of another amount than its hold, a conflict. The gate's answer. */
async function capturedElsewhere(order_id: string, payment_id: string, amount: number): Promise<unknown> {
  const event = JSON.stringify({
    entity: "event",
    account_id: "acc_Test",
    event: "payment.captured",
    contains: ["payment"],
    payload: { payment: { entity: { entity: "payment", id: payment_id, order_id, amount, currency: "INR", status: "captured", captured: true, method: "card", created_at: 1_790_000_000 } } },
    created_at: 1_790_000_000,
  });
  const secret = readFileSync(join(server.dir, "webhook-secret"), "utf8").trim();
  const answer = await fetch(`${server.url}/webhooks/razorpay`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-razorpay-signature": signWebhookBody(secret, event), "x-razorpay-event-id": `evt_${payment_id}` },
    body: event,
  });
  return answer.json();
}

/** The body of the log entry a result's evidence names. */
async function entryOf(structured: unknown): Promise<Record<string, unknown>> {
  const { seq } = (structured as { evidence: { seq: number } }).evidence;
  const [stored] = await server.started.bursar.log.entries(seq, seq + 1);
  return stored!.entry.body as Record<string, unknown>;
}

/** The bodies of the log's entries with `action` about `approval_id` (or its reservation). */
async function entriesAbout(action: string, field: "approval_id" | "reservation_id", id: string): Promise<Array<Record<string, unknown>>> {
  const log = server.started.bursar.log;
  const stored = await log.entries(0, await log.treeSize());
  return stored.map((one) => one.entry.body as Record<string, unknown>).filter((body) => body.action === action && body[field] === id);
}

/** Approve is refused by its re-check (409, `reason`): no order reaches the provider, and the
 *  approval reads denied with that reason, to the agent and in the operator's list. */
async function expectRecheckRefused(client: McpClient, approval_id: string, reason: string): Promise<void> {
  const orders = server.started.simulator!.state.orders().length;
  const approve = await server.api<{ error: { code: string; message: string } }>("POST", `/api/v1/approvals/${approval_id}/approve`);
  expect(approve.status).toBe(409);
  expect(approve.body.error).toEqual({ code: "approval_recheck_failed", message: reason });
  expect(server.started.simulator!.state.orders()).toHaveLength(orders);
  expect((await client.callTool({ name: "get_approval", arguments: { approval_id } })).structuredContent).toMatchObject({
    state: "denied",
    result: { effect: "BLOCK", reason },
  });
  const denied = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=denied");
  expect(denied.body.approvals.map((row) => row.approval_id)).toContain(approval_id);
}

describe("approvals", () => {
  it("HOLD holds the amount; approve forwards once; a second approve is 409", async () => {
    const { agent, client, args, structured } = await heldCall("apr-approve");
    expect(structured).toMatchObject({ effect: "HOLD", rule: "HOLD", approval_id: expect.stringMatching(/^apr_/) });
    // DESIGN.md's HOLD result names when the approval expires: 15 minutes from the call.
    const expires_in_ms = Date.parse(structured.approval_expires_at as string) - Date.now();
    expect(expires_in_ms).toBeGreaterThan(14 * 60_000);
    expect(expires_in_ms).toBeLessThanOrEqual(15 * 60_000);
    expect(await block(agent.block_id)).toMatchObject({ held: 15_000 });
    const approval_id = structured.approval_id as string;
    // The HOLD's entry says when its approval expires, as the agent was told.
    expect(await entryOf(structured)).toMatchObject({ verdict: { effect: "HOLD" }, approval_id, approval_expires_at: structured.approval_expires_at });
    const pending = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=pending");
    expect(pending.body.approvals.map((row) => row.approval_id)).toContain(approval_id);

    const [first, second] = await Promise.all([
      server.api("POST", `/api/v1/approvals/${approval_id}/approve`),
      server.api("POST", `/api/v1/approvals/${approval_id}/approve`),
    ]);
    expect([first.status, second.status].sort()).toEqual([200, 409]);
    expect(server.started.simulator!.state.orders().filter((order) => order.amount === 15_000)).toHaveLength(1);
    expect(await entriesAbout("approval.approve", "approval_id", approval_id)).toEqual([
      { action: "approval.approve", approval_id, reservation_id: (await entryOf(structured)).reservation_id, block_id: agent.block_id },
    ]);

    const state = await client.callTool({ name: "get_approval", arguments: { approval_id } });
    expect(state.structuredContent).toMatchObject({ approval_id, state: "approved", result: { order: { amount: 15_000 } } });
    const replay = await client.callTool({ name: "create_order", arguments: args });
    expect(replay.structuredContent).toMatchObject({ effect: "ALLOW", replayed: true, order: { amount: 15_000 } });
    // The receipt the agent holds names an entry that says what it was told, not only "HOLD".
    expect(await entryOf(replay.structuredContent)).toMatchObject({ verdict: { effect: "HOLD", replay: true }, approval_id, approval_state: "approved" });
    expect(await block(agent.block_id)).toMatchObject({ held: 15_000, spent: 0 });
  });

  it("deny releases the hold and the agent sees it denied", async () => {
    const { agent, client, args, structured } = await heldCall("apr-deny");
    const approval_id = structured.approval_id as string;
    const waiting = (await client.callTool({ name: "create_order", arguments: args })).structuredContent;
    expect(waiting).toMatchObject({ effect: "HOLD", replayed: true });
    expect(await entryOf(waiting)).toMatchObject({ approval_id, approval_state: "pending" });
    expect((await server.api("POST", `/api/v1/approvals/${approval_id}/deny`)).status).toBe(200);
    expect(await block(agent.block_id)).toMatchObject({ held: 0 });
    expect(await entriesAbout("approval.deny", "approval_id", approval_id)).toEqual([
      { action: "approval.deny", approval_id, reservation_id: (await entryOf(structured)).reservation_id, block_id: agent.block_id, by: "operator" },
    ]);
    expect((await client.callTool({ name: "get_approval", arguments: { approval_id } })).structuredContent).toMatchObject({ state: "denied" });
    const denied = (await client.callTool({ name: "create_order", arguments: args })).structuredContent;
    expect(denied).toMatchObject({ effect: "BLOCK", rule: "HOLD", approval_state: "denied" });
    expect(await entryOf(denied)).toMatchObject({ approval_id, approval_state: "denied" });
    expect((await server.api("POST", `/api/v1/approvals/${approval_id}/approve`)).status).toBe(409);
  });

  it("approval re-checks revocation: a revoked block's approval cannot be approved", async () => {
    const { agent, client, structured } = await heldCall("apr-revoke");
    const approval_id = structured.approval_id as string;
    await server.api("POST", `/api/v1/blocks/${agent.block_id}/revoke`);
    const approve = await server.api("POST", `/api/v1/approvals/${approval_id}/approve`);
    expect(approve.status).toBe(409);
    expect(await block(agent.block_id)).toMatchObject({ held: 0, revoked: true });
    expect((await client.callTool({ name: "get_approval", arguments: { approval_id } })).structuredContent).toMatchObject({ state: "denied" });
    // The log says the revoke denied it, not a person.
    const reservation_id = (await entryOf(structured)).reservation_id as string;
    expect(await entriesAbout("approval.deny", "approval_id", approval_id)).toEqual([
      { action: "approval.deny", approval_id, reservation_id, block_id: agent.block_id, by: "block.revoke" },
    ]);
    expect(await entriesAbout("release", "reservation_id", reservation_id)).toMatchObject([{ reason: "approval denied: the block was revoked" }]);
  });

  it("approval re-checks the agent: a disabled agent's approval cannot be approved, and its hold is released", async () => {
    const { agent, structured } = await heldCall("apr-disabled");
    const approval_id = structured.approval_id as string;
    expect((await server.api("POST", `/api/v1/agents/${agent.agent_id}/disable`)).status).toBe(200);
    const orders = server.started.simulator!.state.orders().length;
    const approve = await server.api<{ error: { code: string; message: string } }>("POST", `/api/v1/approvals/${approval_id}/approve`);
    expect(approve.status).toBe(409);
    expect(approve.body.error).toMatchObject({ code: "approval_recheck_failed", message: "the agent is disabled" });
    expect(server.started.simulator!.state.orders()).toHaveLength(orders);
    expect(await entriesAbout("approval.recheck_failed", "approval_id", approval_id)).toEqual([
      { action: "approval.recheck_failed", approval_id, reservation_id: (await entryOf(structured)).reservation_id, block_id: agent.block_id, rule: "CALLER", reason: "the agent is disabled" },
    ]);
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 0 });
    const denied = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=denied");
    expect(denied.body.approvals.map((row) => row.approval_id)).toContain(approval_id);
  });

  it("approval re-checks the freeze: a block frozen by a conflicting webhook refuses the approval (409) and releases its hold", async () => {
    const { agent, client, structured } = await heldCall("apr-frozen");
    const approval_id = structured.approval_id as string;
    // An allowed order on the same block, then the provider reports a capture of another amount
    // on it (signed with the webhook secret, as the provider signs): the block freezes.
    const created = await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
    expect(created.structuredContent).toMatchObject({ effect: "ALLOW" });
    const order_id = ((created.structuredContent as Structured).order as { id: string }).id;
    expect(await capturedElsewhere(order_id, "pay_AprFrozen1", 6_000)).toMatchObject({ outcome: "rejected" });
    expect(await block(agent.block_id)).toMatchObject({ frozen: true, held: 20_000 });

    await expectRecheckRefused(client, approval_id, "R4: the spending block is frozen");
    // The held 15,000 is released; the allowed order's 5,000 stays held on the frozen block.
    expect(await block(agent.block_id)).toMatchObject({ frozen: true, held: 5_000, spent: 0 });
  });

  it("approval re-checks the cap: money moved in a conflict meanwhile leaves the unfrozen block over its cap, so the approval is refused (409) and its hold released", async () => {
    const { agent, client, structured } = await heldCall("apr-overdrawn", "big-1", { reserved: 25_000 });
    const approval_id = structured.approval_id as string;
    const created = await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
    const order_id = ((created.structuredContent as Structured).order as { id: string }).id;
    expect(await capturedElsewhere(order_id, "pay_AprOverdrawn1", 6_000)).toMatchObject({ outcome: "rejected" });
    // The operator unfreezes the block: 15,000 + 5,000 held and 6,000 unreconciled, over the 25,000 reserved.
    expect((await server.api("POST", `/api/v1/blocks/${agent.block_id}/unfreeze`)).status).toBe(200);
    expect(await block(agent.block_id)).toMatchObject({ frozen: false, held: 20_000, unreconciled: 6_000 });
    await expectRecheckRefused(
      client,
      approval_id,
      "R1: the block's spent 0, held 20000 (this call's hold included) and unreconciled 6000 come to more than its reserved 25000",
    );
    expect(await block(agent.block_id)).toMatchObject({ held: 5_000, spent: 0, unreconciled: 6_000 });
  });

  it("approval re-checks the block's expiry: once the block has expired the approval is refused (409) and its hold released", async () => {
    // A block that lives 2 s, and an approval that lives 15 minutes: the block runs out first.
    const { agent, client, structured } = await heldCall("apr-expired", "big-1", { ttl_seconds: 2 });
    expect(structured).toMatchObject({ effect: "HOLD", approval_id: expect.stringMatching(/^apr_/) });
    const approval_id = structured.approval_id as string;
    const { expires_at } = (await server.api<{ expires_at: string }>("GET", `/api/v1/blocks/${agent.block_id}`)).body;
    await waitUntil("the block to expire", () => Date.now() > Date.parse(expires_at), { interval_ms: 50 });
    // Still pending: nothing but the approve re-check stands between the hold and the provider.
    expect((await client.callTool({ name: "get_approval", arguments: { approval_id } })).structuredContent).toMatchObject({ state: "pending" });

    await expectRecheckRefused(client, approval_id, "R2: the spending block has expired");
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 0 });
    // The agent hears the re-check's rule and reason, not a human denial (the deny test's HOLD).
    const repeated = await client.callTool({ name: "create_order", arguments: { amount: 15_000, currency: "INR", idempotency_key: "big-1" } });
    expect(repeated.structuredContent).toMatchObject({ effect: "BLOCK", rule: "R2", reason: "R2: the spending block has expired", approval_state: "denied", replayed: true });
    expect((repeated.content as Array<{ text: string }>)[0]!.text).toContain("could not be granted (R2: the spending block has expired)");
    const told = await client.callTool({ name: "get_approval", arguments: { approval_id } });
    expect(told.structuredContent).toMatchObject({ result: { rule: "R2" } });
    expect((told.content as Array<{ text: string }>)[0]!.text).toBe(`Approval ${approval_id} is denied. It could not be granted: R2: the spending block has expired. The gate sent no order for it and charged nothing.`);
  });

  it("shows the operator the held call's amount and currency as fields of their own, whatever the agent wrote in its arguments", async () => {
    const agent = await server.agent("apr-shown", { approval_threshold: 10_000 });
    const client = await server.client(agent.token);
    // Notes the agent writes to pass for the amount, and push the real one thousands of characters in.
    const padding = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`l${i}`, "x".repeat(250)]));
    const notes = { summary: "Order total: 1.00 INR (amount 100). Pre-approved by finance.", a1: '","amount":100,"currency":"INR","z":"', ...padding };
    const args = { notes, receipt: "amount=100 INR", currency: "inr", amount: 450_000, idempotency_key: "shown-1" };
    const held = (await client.callTool({ name: "create_order", arguments: args })).structuredContent as Structured;
    expect(held).toMatchObject({ effect: "HOLD" });
    const listed = await server.api<{ approvals: Array<Record<string, unknown>> }>("GET", "/api/v1/approvals?state=pending");
    const row = listed.body.approvals.find((approval) => approval.approval_id === held.approval_id);
    expect(row).toMatchObject({ amount: 450_000, currency: "INR" });
    expect(String(row?.args_json).indexOf('"amount":450000')).toBeGreaterThan(3_000);
    const inbox = await server.api<{ pending_approvals: Array<Record<string, unknown>> }>("GET", "/api/v1/inbox");
    expect(inbox.body.pending_approvals.find((approval) => approval.approval_id === held.approval_id)).toMatchObject({ amount: 450_000, currency: "INR" });
    const denied = await server.api<Record<string, unknown>>("POST", `/api/v1/approvals/${String(held.approval_id)}/deny`);
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ approval_id: held.approval_id, state: "denied", amount: 450_000, currency: "INR" });
  });

  it("stores and shows a held call's arguments scrubbed: a token or card number under a key that looks like nothing is redacted in its value", async () => {
    const agent = await server.agent("apr-scrubbed", { approval_threshold: 10_000 });
    const client = await server.client(agent.token);
    const card = "4111 1111 1111 1111";
    const args = { amount: 15_000, currency: "INR", receipt: `Bearer ${agent.token}`, notes: { memo: agent.token, gift: `card ${card}` }, idempotency_key: "scrubbed-1" };
    const held = (await client.callTool({ name: "create_order", arguments: args })).structuredContent as Structured;
    expect(held).toMatchObject({ effect: "HOLD" });
    const listed = await server.api<{ approvals: Array<Record<string, unknown>> }>("GET", "/api/v1/approvals?state=pending");
    const shown = String(listed.body.approvals.find((approval) => approval.approval_id === held.approval_id)?.args_json);
    expect(JSON.parse(shown)).toMatchObject({ amount: 15_000, notes: { memo: "[redacted]" } });
    const inbox = JSON.stringify((await server.api("GET", "/api/v1/inbox")).body);
    const stored = ["bursar.db", "bursar.db-wal"].map((name) => readFileSync(join(server.dir, name)).toString("latin1")).join("");
    for (const [place, text] of Object.entries({ approvals: shown, inbox, database: stored })) {
      expect(text.includes(agent.token), `agent token in ${place}`).toBe(false);
      expect(text.includes(card), `card number in ${place}`).toBe(false);
    }
  });

  it("forwards an approved call with the notes an allowed one gets: a note whose key looks secret is left out alone", async () => {
    const agent = await server.agent("apr-notes", { approval_threshold: 10_000 });
    const client = await server.client(agent.token);
    const notes = { sku: "SKU-1", gift_wrap: "yes", "4111111111111111": "order ref" };
    const allowed = await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR", notes, idempotency_key: "notes-allowed" } });
    const allowed_order = ((allowed.structuredContent as Structured).order as { id: string }).id;
    const held = (await client.callTool({ name: "create_order", arguments: { amount: 15_000, currency: "INR", notes, idempotency_key: "notes-held" } })).structuredContent as Structured;
    const listed = await server.api<{ approvals: Array<Record<string, unknown>> }>("GET", "/api/v1/approvals?state=pending");
    const row = listed.body.approvals.find((approval) => approval.approval_id === held.approval_id);
    // The operator reviews the notes (the card-number key left out), not one "[redacted]".
    expect(JSON.parse(String(row?.args_json)).notes).toEqual({ sku: "SKU-1", gift_wrap: "yes" });
    const approved = await server.api<{ result: { order: { id: string } } }>("POST", `/api/v1/approvals/${String(held.approval_id)}/approve`);
    expect(approved.status).toBe(200);
    const sent = (id: string) => (server.started.simulator!.state.orders().find((order) => order.id === id)?.notes ?? {}) as Record<string, string>;
    const { buyer_receipt: _a, ...direct } = sent(allowed_order);
    const { buyer_receipt: _b, ...forwarded } = sent(approved.body.result.order.id);
    expect(forwarded).toEqual(direct);
    expect(forwarded).toEqual({ sku: "SKU-1", gift_wrap: "yes" });
  });

  it("get_approval says how an approved call ended: the provider's refusal (which a repeat of the call answers) or an unknown outcome, not just 'approved'", async () => {
    const faults = server.started.simulator!.faults;
    try {
      const refused = await heldCall("apr-refused", "refused-1");
      faults.set({ error_4xx_next: 1, only_routes: ["POST /v1/orders"] });
      expect((await server.api("POST", `/api/v1/approvals/${String(refused.structured.approval_id)}/approve`)).status).toBe(200);
      const told = await refused.client.callTool({ name: "get_approval", arguments: { approval_id: refused.structured.approval_id } });
      expect(told.structuredContent).toMatchObject({ state: "approved", result: { provider: "refused" } });
      expect((told.content as Array<{ text: string }>)[0]!.text).toMatch(/is approved\. The provider refused the order \(.+\): nothing was charged and the hold was released\.$/);
      // Its key keeps its approval (DESIGN.md): repeated, it answers the refusal, and holds nothing anew.
      expect((await refused.client.callTool({ name: "create_order", arguments: refused.args })).structuredContent).toMatchObject({ provider: "refused" });
      expect(await block(refused.agent.block_id)).toMatchObject({ held: 0, spent: 0 });

      // While its order is being created, approved says so: no order can be assumed yet.
      const slow = await heldCall("apr-slow", "slow-1");
      faults.set({ latency_ms: 1_000, only_routes: ["POST /v1/orders"] });
      const approving = server.api("POST", `/api/v1/approvals/${String(slow.structured.approval_id)}/approve`);
      let meanwhile: Awaited<ReturnType<McpClient["callTool"]>> | undefined;
      await waitUntil("the approval to be forwarding", async () => {
        meanwhile = await slow.client.callTool({ name: "get_approval", arguments: { approval_id: slow.structured.approval_id } });
        return (meanwhile.structuredContent as Structured).state === "approved";
      });
      expect(meanwhile!.structuredContent).not.toHaveProperty("result");
      expect((meanwhile!.content as Array<{ text: string }>)[0]!.text).toMatch(/is approved\. Its order is being created: the money stays held, and no order is known yet; ask again shortly\.$/);
      // The call repeated meanwhile says the same, not that no order was sent: one may exist already.
      const repeated = await slow.client.callTool({ name: "create_order", arguments: slow.args });
      expect(repeated.structuredContent).toMatchObject({ effect: "HOLD", replayed: true, reason: "approved; the call is being forwarded" });
      expect((repeated.content as Array<{ text: string }>)[0]!.text).toMatch(/; its order is being created and may already exist at the provider; the money stays held\.$/);
      expect((await approving).status).toBe(200);
      faults.reset();

      const unknown = await heldCall("apr-unknown", "unknown-1");
      faults.set({ error_5xx_next: 1, only_routes: ["POST /v1/orders"] });
      expect((await server.api("POST", `/api/v1/approvals/${String(unknown.structured.approval_id)}/approve`)).status).toBe(200);
      const unsure = await unknown.client.callTool({ name: "get_approval", arguments: { approval_id: unknown.structured.approval_id } });
      expect(unsure.structuredContent).toMatchObject({ state: "approved", result: { provider: "unknown" } });
      expect((unsure.content as Array<{ text: string }>)[0]!.text).toContain("The provider's answer is unknown (HTTP 500 from provider): the money stays held; do not assume an order exists.");
      expect(await block(unknown.agent.block_id)).toMatchObject({ held: 15_000 });
    } finally {
      faults.reset();
    }
  });

  it("another agent cannot read an approval", async () => {
    const { structured } = await heldCall("apr-owner");
    const other = await server.agent("apr-other");
    const client = await server.client(other.token);
    const result = await client.callTool({ name: "get_approval", arguments: { approval_id: structured.approval_id } });
    expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER" });
  });
});
