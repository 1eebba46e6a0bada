// The gate is killed with SIGKILL while money calls are in flight and restarted on the same
// data directory, against a standalone simulator that keeps the provider's state: no hold is
// lost or applied twice, expired leases become outcome-unknown, and the log verifies.
// Between the gate and the simulator sits a barrier the test controls: the gate is killed once
// its order requests are held there unanswered, so they are in flight at the kill by construction.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SqlTx } from "../../src/ledger/driver.js";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar, startBursar, type BursarProcess } from "../support/process.js";
import { waitUntil } from "../support/wait.js";

const admin = "crash-test-operator-token-0123";
const webhook_secret = "crash-test-webhook-secret";
const calls_count = 20;

interface ProviderRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

async function forward(upstream: string, request: ProviderRequest): Promise<{ status: number; body: string }> {
  const response = await fetch(`${upstream}${request.path}`, {
    method: request.method,
    headers: request.headers,
    ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: new Uint8Array(request.body) }),
  });
  return { status: response.status, body: await response.text() };
}

/**
 * A loopback HTTP hop in front of the simulator. While holding, it keeps every order creation
 * (POST /v1/orders) it receives and never answers it; everything else passes straight through.
 */
async function providerBarrier(upstream: string): Promise<{ url: string; held: ProviderRequest[]; stopHolding(): void; close(): Promise<void> }> {
  let holding = true;
  const held: ProviderRequest[] = [];
  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const headers: Record<string, string> = {};
      for (const name of ["authorization", "content-type", "accept"]) {
        const value = incoming.headers[name];
        if (typeof value === "string") headers[name] = value;
      }
      const request = { method: incoming.method ?? "GET", path: incoming.url ?? "/", headers, body: Buffer.concat(chunks) };
      if (holding && request.method === "POST" && request.path.split("?")[0] === "/v1/orders") return void held.push(request);
      forward(upstream, request).then(
        (answer) => outgoing.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body),
        () => outgoing.destroy(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    stopHolding: () => void (holding = false),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("gate crash", () => {
  let dir: string;
  let simulator: BursarProcess;
  let barrier: Awaited<ReturnType<typeof providerBarrier>>;
  let gate_env: Record<string, string>;
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-crash-"));
    const gate_port = await freePort();
    simulator = await startBursar(
      ["simulator", "--port", "0", "--webhook-url", `http://127.0.0.1:${gate_port}/webhooks/razorpay`, "--webhook-secret", webhook_secret],
      {},
    );
    barrier = await providerBarrier(simulator.url);
    gate_env = {
      BURSAR_DATA_DIR: dir,
      BURSAR_PORT: String(gate_port),
      BURSAR_ADMIN_TOKEN: admin,
      BURSAR_PROVIDER: "razorpay",
      RAZORPAY_KEY_ID: "rzp_test_crash",
      RAZORPAY_KEY_SECRET: "crash-secret",
      RAZORPAY_BASE_URL: barrier.url,
      RAZORPAY_WEBHOOK_SECRET: webhook_secret,
      // The gate's own provider timeout must not strike before the kill (the calls would then end
      // as timed out, not in flight): 2 s is far beyond the tens of ms the 20 calls take to arrive
      // at the barrier, and a kill that came too late fails the in-flight check below loudly.
      // Leases are twice this, so the restart waits out about 4 s.
      BURSAR_PROVIDER_TIMEOUT_MS: "2000",
    };
  });
  afterAll(async () => {
    await barrier?.close();
    await simulator?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function api(url: string, method: string, path: string, body?: unknown) {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return (await response.json()) as Record<string, unknown>;
  }

  /** Reads the gate's database file (after the gate has stopped, or died). */
  async function readDb<T>(work: (tx: SqlTx) => Promise<T>): Promise<T> {
    const driver = new SqliteDriver({ path: join(dir, "bursar.db"), readonly: true });
    try {
      return await driver.read(work);
    } finally {
      await driver.close();
    }
  }

  it("loses no hold, applies none twice, and the log verifies after SIGKILL and restart", async () => {
    let gate = await startBursar(["serve"], gate_env);
    const agent = (await api(gate.url, "POST", "/api/v1/agents", { name: "crash" })) as { agent_id: string; token: string };
    const block = (await api(gate.url, "POST", "/api/v1/blocks", {
      agent_id: agent.agent_id,
      currency: "INR",
      reserved: 10_000_000,
      per_call_cap: 100_000,
      approval_threshold: 100_000,
      velocity: { max_calls: 1000, window_seconds: 60 },
    })) as { block_id: string };

    const client = new Client({ name: "crash-buyer", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gate.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.token}` } } }));
    const calls = Array.from({ length: calls_count }, (_, index) =>
      client.callTool({ name: "create_order", arguments: { amount: 1_000 + index, currency: "INR", idempotency_key: `crash-${index}` } }).catch(() => "lost"),
    );
    // Killed once every call's order request reached the provider, which holds them all unanswered.
    await waitUntil(`all ${calls_count} order requests to reach the provider`, () => barrier.held.length >= calls_count);
    await gate.stop("SIGKILL");
    await Promise.all(calls);
    await client.close().catch(() => undefined);
    const held_at_kill = barrier.held.length;
    // The provider then acts on what it had received, as Razorpay does whether or not the caller is still there.
    barrier.stopHolding();
    for (const request of barrier.held.splice(0)) expect((await forward(simulator.url, request)).status).toBe(200);

    // Every held call was still in flight when the gate died (its own provider timeout had not
    // struck yet): its key is in flight, under a lease no process will end.
    const leases = await readDb(async (tx) =>
      tx.get<{ count: number; last_ms: number | null }>("SELECT COUNT(*) AS count, MAX(lease_expires_at_ms) AS last_ms FROM idempotency_keys WHERE status = 'in_flight'"),
    );
    expect(leases?.count).toBe(held_at_kill);
    // Restart once the last lease has run out (the gate reads the same wall clock): they turn outcome-unknown at start.
    const last_ms = leases?.last_ms ?? 0;
    await waitUntil("the in-flight leases to run out", () => Date.now() > last_ms);
    gate = await startBursar(["serve"], gate_env);
    const inbox = (await api(gate.url, "GET", "/api/v1/inbox")) as { unknown_outcomes: Array<{ reservation_id: string }> };
    const after = (await api(gate.url, "GET", `/api/v1/blocks/${block.block_id}`)) as { held: number; spent: number };
    await gate.stop("SIGTERM");

    const facts = await readDb(async (tx) => ({
      held: await tx.get<{ total: number; count: number }>("SELECT COALESCE(SUM(amount), 0) AS total, COUNT(*) AS count FROM reservations WHERE status = 'held'"),
      in_flight: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM idempotency_keys WHERE status = 'in_flight'"),
      orphans: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM reservations WHERE status = 'held' AND order_id IS NULL AND outcome_unknown = 0"),
      reservations: await tx.all<{ reservation_id: string }>("SELECT reservation_id FROM reservations"),
    }));
    // No hold lost: the block's held is exactly the sum of held reservations.
    expect(after.held).toBe(facts.held?.total);
    expect(after.spent).toBe(0);
    // No key stuck in flight; every hold either has its order or is in the inbox as unknown.
    expect(facts.in_flight?.count).toBe(0);
    expect(facts.orphans?.count).toBe(0);
    // Nothing applied twice: each provider order belongs to exactly one reservation.
    const orders = (await (await fetch(`${simulator.url}/v1/orders?count=100`, { headers: { authorization: `Basic ${Buffer.from("rzp_test_crash:x").toString("base64")}` } })).json()) as {
      items: Array<{ receipt: string }>;
    };
    const receipts = orders.items.map((order) => order.receipt);
    expect(new Set(receipts).size).toBe(receipts.length);
    const known = new Set(facts.reservations.map((row) => row.reservation_id));
    expect(receipts.every((receipt) => known.has(receipt))).toBe(true);
    // The calls in flight at the kill are now outcome-unknown holds in the operator inbox.
    expect(inbox.unknown_outcomes.length).toBeGreaterThanOrEqual(held_at_kill);
    expect(inbox.unknown_outcomes.length).toBeLessThanOrEqual(facts.held?.count ?? 0);

    const out = join(dir, "log.jsonl");
    const checkpoint = join(dir, "cp.txt");
    const env = { BURSAR_DATA_DIR: dir };
    expect((await runBursar(["export", "--out", out, "--checkpoint", checkpoint], env)).code).toBe(0);
    const key = (await runBursar(["key"], env)).stdout.trim();
    const verified = await runBursar(["verify", out, "--checkpoint", checkpoint, "--key", key]);
    expect(verified.stderr + verified.stdout).not.toMatch(/FAIL|mismatch/i);
    expect(verified.code).toBe(0);
  });
});
