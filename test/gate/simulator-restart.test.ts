// The simulator `bursar serve` mounts keeps orders in memory only: after a restart on the same
// data directory, holds on orders made before it are listed in the inbox and a reservation check
// releases them. A provider that is not the mounted simulator answering "does not exist" for an
// order the gate made still releases nothing. Real servers, real SQLite, restart = close + start.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { bufferLines, exportLog, verifyExportLines } from "../../src/evidence/index.js";
import { startServer, type Started } from "../../src/server/start.js";
import { expectBooksBalance } from "../support/ledger.js";
import { operator_token, operatorApi } from "../support/server.js";
import { startSimulator, type RunningSimulator } from "../provider/support.js";
import { key_id, key_secret, webhook_secret } from "../provider/support.js";

type Structured = Record<string, unknown>;

interface Gate {
  started: Started;
  api<T = Structured>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  call(token: string, name: string, args: Structured): Promise<Structured>;
  close(): Promise<void>;
}

/** `bursar serve` in this process on `dir`; closing it leaves the data directory for the next start. */
async function startGate(dir: string, env: Record<string, string> = {}): Promise<Gate> {
  const started = await startServer(loadConfig({ BURSAR_DATA_DIR: dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: operator_token, ...env }), { logger: false });
  const clients: Client[] = [];
  const api = operatorApi(started.url);
  return {
    started,
    api,
    async call(token, name, args) {
      const client = new Client({ name: "restart-buyer", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${started.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      clients.push(client);
      return (await client.callTool({ name, arguments: args })).structuredContent as Structured;
    },
    async close() {
      for (const client of clients) await client.close().catch(() => undefined);
      await started.app.close();
    },
  };
}

async function agentWithBlock(gate: Gate): Promise<{ token: string; block_id: string }> {
  const agent = await gate.api<{ agent_id: string; token: string }>("POST", "/api/v1/agents", { name: "buyer" });
  const block = await gate.api<{ block_id: string }>("POST", "/api/v1/blocks", {
    agent_id: agent.body.agent_id,
    currency: "INR",
    reserved: 1_000_000,
    ttl_seconds: 86_400,
    velocity: { max_calls: 1000, window_seconds: 60 },
  });
  expect(block.status).toBe(201);
  return { token: agent.body.token, block_id: block.body.block_id };
}

async function pay(checkout_base: string, order_id: string): Promise<string> {
  const response = await fetch(`${checkout_base}/sim/orders/${order_id}/pay`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ card: "4111111111111111" }),
  });
  const body = (await response.json()) as { razorpay_payment_id?: string };
  expect(response.status, JSON.stringify(body)).toBe(200);
  return body.razorpay_payment_id as string;
}

/** The environment that points bursar serve at a standalone simulator, as at a real Razorpay account. */
function razorpayEnv(simulator: RunningSimulator): Record<string, string> {
  return {
    BURSAR_PROVIDER: "razorpay",
    RAZORPAY_BASE_URL: simulator.base_url,
    RAZORPAY_KEY_ID: key_id,
    RAZORPAY_KEY_SECRET: key_secret,
    RAZORPAY_WEBHOOK_SECRET: webhook_secret,
  };
}

/** The log as `bursar export` writes it, verified offline against the server's key and checkpoint. */
async function expectLogVerifies(gate: Gate): Promise<Array<{ kind: string; body: Structured }>> {
  await gate.started.bursar.log.checkpoint();
  const checkpoint = await (await fetch(`${gate.started.url}/api/v1/log/checkpoint`)).text();
  const key = (await (await fetch(`${gate.started.url}/.well-known/bursar/log-key`)).text()).trim();
  const size = Number(checkpoint.split("\n")[1]);
  const chunks: string[] = [];
  await exportLog(gate.started.bursar.driver, { size, exported_at: new Date().toISOString(), write: async (text) => void chunks.push(text) });
  const exported = Buffer.from(chunks.join(""));
  const report = verifyExportLines(bufferLines(exported), { checkpoint, key, allReceipts: true });
  expect(report.failure).toBeUndefined();
  expect(report).toMatchObject({ ok: true, tree_size: size, entries: size });
  return exported
    .toString("utf8")
    .split("\n")
    .filter((line) => line.startsWith('{"body":'))
    .map((line) => JSON.parse(line) as { kind: string; body: Structured });
}

describe("a restart of bursar serve with the mounted simulator", () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function dataDir(): string {
    const dir = mkdtempSync(join(tmpdir(), "bursar-sim-restart-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  /** The environment of a gate on a standalone simulator, as on a real account; the simulator closes after the test. */
  async function realProviderEnv(): Promise<Record<string, string>> {
    const simulator = await startSimulator();
    cleanups.push(() => simulator.close());
    return razorpayEnv(simulator);
  }

  it("lists a hold on an order the simulator forgot in the inbox, a check releases it (held 0, books balanced, log verified), and the same call then buys anew", async () => {
    const dir = dataDir();
    const first = await startGate(dir);
    const agent = await agentWithBlock(first);
    const created = await first.call(agent.token, "create_order", { amount: 50_000, currency: "INR", idempotency_key: "cart-1" });
    expect(created.effect).toBe("ALLOW");
    const order_id = (created.order as { id: string }).id;
    const reservation_id = created.reservation_id as string;
    await pay(`${first.started.url}/simulator`, order_id);
    await first.close();

    const second = await startGate(dir);
    cleanups.push(() => second.close());
    // The start found the hold whose order the fresh simulator cannot know and listed it.
    const inbox = await second.api<{ unknown_outcomes: Array<{ reservation_id: string; unknown_reason: string }>; unknown_outcomes_total: number }>("GET", "/api/v1/inbox");
    expect(inbox.body.unknown_outcomes_total).toBe(1);
    expect(inbox.body.unknown_outcomes[0]).toMatchObject({ reservation_id, unknown_reason: expect.stringContaining(`POST /api/v1/reservations/${reservation_id}/check releases the hold`) });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 50_000, spent: 0 });

    const check = await second.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ reservation_id, order_id, outcome: "released", reason: expect.stringContaining(`no longer has order ${order_id}`) });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0, spent: 0, available: 1_000_000 });
    expect((await second.api<{ unknown_outcomes_total: number }>("GET", "/api/v1/inbox")).body.unknown_outcomes_total).toBe(0);
    await expectBooksBalance(second.started.bursar);
    // Checked again, it releases nothing more.
    expect((await second.api("POST", `/api/v1/reservations/${reservation_id}/check`)).body).toMatchObject({ outcome: "not_found", reason: expect.stringContaining("the reservation is released") });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0, available: 1_000_000 });

    // The call's key went with the hold: repeated unchanged, it is decided again and buys anew.
    const again = await second.call(agent.token, "create_order", { amount: 50_000, currency: "INR", idempotency_key: "cart-1" });
    expect(again).toMatchObject({ effect: "ALLOW" });
    expect(again.replayed).toBeUndefined();
    const new_order = (again.order as { id: string }).id;
    expect(new_order).not.toBe(order_id);
    const payment_id = await pay(`${second.started.url}/simulator`, new_order);
    const captured = await second.call(agent.token, "capture_payment", { payment_id, amount: 50_000, currency: "INR" });
    expect(captured).toMatchObject({ effect: "ALLOW", payment: { id: payment_id, status: "captured" } });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0, spent: 50_000 });
    await expectBooksBalance(second.started.bursar);

    const entries = await expectLogVerifies(second);
    const settlement = (body: Structured) => expect.objectContaining({ kind: "gate.settlement", body: expect.objectContaining(body) });
    expect(entries).toContainEqual(settlement({ action: "outcome_unknown", reservation_id, reason: expect.stringContaining(`order ${order_id} was made by the simulator mounted in an earlier process`) }));
    expect(entries).toContainEqual(settlement({ action: "release", reservation_id, block_id: agent.block_id, amount: 50_000, reason: expect.stringContaining(`no longer has order ${order_id}`) }));
  });

  it("marks such a hold once: a second restart neither marks it again nor logs another entry for it", async () => {
    const dir = dataDir();
    const first = await startGate(dir);
    const agent = await agentWithBlock(first);
    const created = await first.call(agent.token, "create_order", { amount: 30_000, currency: "INR", idempotency_key: "cart-2" });
    const reservation_id = created.reservation_id as string;
    await first.close();
    const marks = async (gate: Gate) =>
      (await expectLogVerifies(gate)).filter((entry) => entry.body.action === "outcome_unknown" && entry.body.reservation_id === reservation_id).length;
    const second = await startGate(dir);
    expect(await marks(second)).toBe(1);
    await second.close();
    const third = await startGate(dir);
    cleanups.push(() => third.close());
    expect(await marks(third)).toBe(1);
    expect((await third.api<{ unknown_outcomes_total: number }>("GET", "/api/v1/inbox")).body.unknown_outcomes_total).toBe(1);
    expect((await third.api("POST", `/api/v1/reservations/${reservation_id}/check`)).body).toMatchObject({ outcome: "released" });
    expect((await third.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0 });
    await expectBooksBalance(third.started.bursar);
  });

  it("with a standalone simulator behind BURSAR_PROVIDER=razorpay, an order the provider says does not exist stays held: the check answers unknown and says why", async () => {
    const dir = dataDir();
    let suffix = 0;
    // Ids unlike the first simulator's, as another account's would be.
    const fresh_ids = (prefix: string) => () => `${prefix}${String(++suffix).padStart(13, "0")}`;
    const before = await startSimulator({ ids: fresh_ids("A") });
    const first = await startGate(dir, razorpayEnv(before));
    const agent = await agentWithBlock(first);
    const created = await first.call(agent.token, "create_order", { amount: 40_000, currency: "INR", idempotency_key: "cart-3" });
    const order_id = (created.order as { id: string }).id;
    const reservation_id = created.reservation_id as string;
    await pay(before.base_url, order_id);
    await first.close();
    await before.close();

    // The provider no longer knows the order (as after a switch of keys to another account).
    const after = await startSimulator({ ids: fresh_ids("B") });
    cleanups.push(() => after.close());
    const second = await startGate(dir, razorpayEnv(after));
    cleanups.push(() => second.close());
    expect((await second.api<{ unknown_outcomes_total: number }>("GET", "/api/v1/inbox")).body.unknown_outcomes_total).toBe(0);
    const check = await second.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(check.body).toMatchObject({
      reservation_id,
      outcome: "unknown",
      reason: expect.stringMatching(new RegExp(`order ${order_id} does not exist \\(The id provided does not exist\\).*no proof.*the money stays held`)),
    });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 40_000, spent: 0 });
    const entries = await expectLogVerifies(second);
    expect(entries.filter((entry) => entry.body.action === "release" && entry.body.reservation_id === reservation_id)).toHaveLength(0);
    expect(entries).toContainEqual(expect.objectContaining({ kind: "gate.operator", body: expect.objectContaining({ action: "reservation.check", reservation_id, order_id, outcome: "unknown" }) }));
    await expectBooksBalance(second.started.bursar);
  });

  it("a hold whose order the mounted simulator made, after a restart that switches to a real provider: listed in the inbox at start, and released by a check", async () => {
    const dir = dataDir();
    const first = await startGate(dir);
    const agent = await agentWithBlock(first);
    const created = await first.call(agent.token, "create_order", { amount: 30_000, currency: "INR", idempotency_key: "cart-switch" });
    const reservation_id = created.reservation_id as string;
    const order_id = (created.order as { id: string }).id;
    await first.close();

    // Started again on a real provider (a standalone simulator): no provider can have that order.
    const second = await startGate(dir, await realProviderEnv());
    cleanups.push(() => second.close());
    const inbox = await second.api<{ unknown_outcomes: Array<{ reservation_id: string }> }>("GET", "/api/v1/inbox");
    expect(inbox.body.unknown_outcomes.map((row) => row.reservation_id)).toEqual([reservation_id]);
    const check = await second.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(check.body).toMatchObject({ reservation_id, order_id, outcome: "released", reason: expect.stringContaining(`no longer has order ${order_id}`) });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 0, spent: 0 });
    // The same call, repeated, is decided again and makes its order at the real provider.
    const again = await second.call(agent.token, "create_order", { amount: 30_000, currency: "INR", idempotency_key: "cart-switch" });
    expect(again).toMatchObject({ effect: "ALLOW", order: { amount: 30_000 } });
    expect(again.reservation_id).not.toBe(reservation_id);
    await expectLogVerifies(second);
    await expectBooksBalance(second.started.bursar);
  });

  it("a hold whose order a real provider made stays held when the restart switches to the mounted simulator: not listed as lost, the check answers unknown", async () => {
    const dir = dataDir();
    const first = await startGate(dir, await realProviderEnv());
    const agent = await agentWithBlock(first);
    const created = await first.call(agent.token, "create_order", { amount: 20_000, currency: "INR", idempotency_key: "cart-4" });
    const reservation_id = created.reservation_id as string;
    await first.close();

    // Started again with the provider unset: the mounted simulator, which never knew the order.
    // The order still exists at the provider that made it, and can be paid there.
    const second = await startGate(dir);
    cleanups.push(() => second.close());
    expect((await second.api<{ unknown_outcomes_total: number }>("GET", "/api/v1/inbox")).body.unknown_outcomes_total).toBe(0);
    const check = await second.api("POST", `/api/v1/reservations/${reservation_id}/check`);
    expect(check.body).toMatchObject({ reservation_id, outcome: "unknown", reason: expect.stringContaining("no other process's mounted simulator named that order") });
    expect((await second.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 20_000 });
    const entries = await expectLogVerifies(second);
    expect(entries.filter((entry) => entry.kind === "system.start").map((entry) => entry.body.provider)).toEqual(["razorpay", "simulator"]);
    await expectBooksBalance(second.started.bursar);
  });

  it("a HOLD made under the mounted simulator whose approval was forwarded to a real provider after a restart stays held when a later restart mounts the simulator again", async () => {
    const dir = dataDir();
    const first = await startGate(dir);
    const agent = await agentWithBlock(first);
    const held = await first.call(agent.token, "create_order", { amount: 300_000, currency: "INR", idempotency_key: "cart-5" });
    expect(held).toMatchObject({ effect: "HOLD" });
    const approval_id = held.approval_id as string;
    await first.close();

    // Restarted on a real provider (a standalone simulator), where the operator approves: the order is made there.
    const second = await startGate(dir, await realProviderEnv());
    const approved = await second.api<{ result: { reservation_id: string } }>("POST", `/api/v1/approvals/${approval_id}/approve`);
    expect(approved.status).toBe(200);
    const reservation_id = approved.body.result.reservation_id;
    await second.close();

    // Mounted again: the order exists at the provider that made it, so nothing marks or releases its hold.
    const third = await startGate(dir);
    cleanups.push(() => third.close());
    expect((await third.api<{ unknown_outcomes_total: number }>("GET", "/api/v1/inbox")).body.unknown_outcomes_total).toBe(0);
    expect((await third.api("POST", `/api/v1/reservations/${reservation_id}/check`)).body).toMatchObject({ reservation_id, outcome: "unknown" });
    expect((await third.api("GET", `/api/v1/blocks/${agent.block_id}`)).body).toMatchObject({ held: 300_000 });
    await expectBooksBalance(third.started.bursar);
  });
});
