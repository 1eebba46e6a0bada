// The gate is killed with SIGKILL while money calls are in flight and restarted on the same
// data directory, against a standalone simulator that keeps the provider's state: no hold is
// lost or applied twice, expired leases become outcome-unknown, and the log verifies.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteDriver } from "../../src/ledger/sqlite.js";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar, startBursar, type BursarProcess } from "../support/process.js";

const admin = "crash-test-operator-token-0123";
const webhook_secret = "crash-test-webhook-secret";

describe("gate crash", () => {
  let dir: string;
  let simulator: BursarProcess;
  let gate_env: Record<string, string>;
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-crash-"));
    const gate_port = await freePort();
    simulator = await startBursar(
      ["simulator", "--port", "0", "--webhook-url", `http://127.0.0.1:${gate_port}/webhooks/razorpay`, "--webhook-secret", webhook_secret],
      {},
    );
    gate_env = {
      BURSAR_DATA_DIR: dir,
      BURSAR_PORT: String(gate_port),
      BURSAR_ADMIN_TOKEN: admin,
      BURSAR_PROVIDER: "razorpay",
      RAZORPAY_KEY_ID: "rzp_test_crash",
      RAZORPAY_KEY_SECRET: "crash-secret",
      RAZORPAY_BASE_URL: simulator.url,
      RAZORPAY_WEBHOOK_SECRET: webhook_secret,
      BURSAR_PROVIDER_TIMEOUT_MS: "500",
    };
  });
  afterAll(async () => {
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
    await fetch(`${simulator.url}/sim/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ latency_ms: 300 }) });

    const client = new Client({ name: "crash-buyer", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gate.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.token}` } } }));
    const calls = Array.from({ length: 20 }, (_, index) =>
      client.callTool({ name: "create_order", arguments: { amount: 1_000 + index, currency: "INR", idempotency_key: `crash-${index}` } }).catch(() => "lost"),
    );
    // Killed while the provider (300 ms latency) still holds every forwarded call.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await gate.stop("SIGKILL");
    await Promise.all(calls);
    await client.close().catch(() => undefined);
    await fetch(`${simulator.url}/sim/faults`, { method: "DELETE" });

    // Restart after the leases (2 × 500 ms) ran out: they turn outcome-unknown at start.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    gate = await startBursar(["serve"], gate_env);
    const inbox = (await api(gate.url, "GET", "/api/v1/inbox")) as { unknown_outcomes: Array<{ reservation_id: string }> };
    const after = (await api(gate.url, "GET", `/api/v1/blocks/${block.block_id}`)) as { held: number; spent: number };
    await gate.stop("SIGTERM");

    const driver = new SqliteDriver({ path: join(dir, "bursar.db"), readonly: true });
    const facts = await driver.read(async (tx) => ({
      held: await tx.get<{ total: number; count: number }>("SELECT COALESCE(SUM(amount), 0) AS total, COUNT(*) AS count FROM reservations WHERE status = 'held'"),
      in_flight: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM idempotency_keys WHERE status = 'in_flight'"),
      orphans: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM reservations WHERE status = 'held' AND order_id IS NULL AND outcome_unknown = 0"),
      reservations: await tx.all<{ reservation_id: string }>("SELECT reservation_id FROM reservations"),
    }));
    await driver.close();
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
    expect(inbox.unknown_outcomes.length).toBeGreaterThan(0);
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
