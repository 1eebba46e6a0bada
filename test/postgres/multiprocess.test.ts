// Acceptance for issue 8: four `bursar serve` processes on one PostgreSQL schema, one shared
// signing key file, one standalone simulator as the provider. 400 concurrent create_order calls
// over MCP fill a 25-order block exactly; a SIGKILLed process loses nothing and applies nothing
// twice; a webhook and a capture racing on two processes settle once; the log verifies.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { PostgresDriver } from "../../src/ledger/postgres.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar, startBursar, type BursarProcess } from "../support/process.js";

const admin = "pg-multi-operator-token-0123456789";
const webhook_secret = "pg-multi-webhook-secret";
const gates_count = 4;
const pg_server = postgresServerUrl();

type Structured = Record<string, unknown> & { effect?: string; rule?: string };

describe.skipIf(!pg_server)("four bursar serve processes on one PostgreSQL", () => {
  let dir: string;
  let schema: Awaited<ReturnType<typeof freshSchema>>;
  let simulator: BursarProcess;
  let ports: number[];
  let envs: Array<Record<string, string>>;
  let gates: BursarProcess[] = [];
  let db: PostgresDriver;
  const clients: Client[] = [];

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-pg-multi-"));
    schema = await freshSchema(pg_server as string);
    const key_path = join(dir, "signing-key.pem");
    writeFileSync(key_path, generateSigningKeyPem(), { mode: 0o600 });
    ports = await Promise.all(Array.from({ length: gates_count }, () => freePort()));
    // Provider webhooks go to gate 0; captures in the race test go through gate 1.
    simulator = await startBursar(
      ["simulator", "--port", "0", "--webhook-url", `http://127.0.0.1:${ports[0]}/webhooks/razorpay`, "--webhook-secret", webhook_secret],
      {},
    );
    envs = ports.map((port, index) => {
      const data_dir = join(dir, `gate-${index}`);
      mkdirSync(data_dir);
      return {
        BURSAR_DATA_DIR: data_dir,
        BURSAR_DB: schema.url,
        BURSAR_PORT: String(port),
        BURSAR_SIGNING_KEY: key_path,
        BURSAR_ADMIN_TOKEN: admin,
        BURSAR_PROVIDER: "razorpay",
        RAZORPAY_KEY_ID: "rzp_test_pgmulti",
        RAZORPAY_KEY_SECRET: "pg-multi-secret",
        RAZORPAY_BASE_URL: simulator.url,
        RAZORPAY_WEBHOOK_SECRET: webhook_secret,
        BURSAR_PROVIDER_TIMEOUT_MS: "1000",
      };
    });
    // All four start at once on an empty schema: migrations and genesis must not race.
    gates = await Promise.all(envs.map((env) => startBursar(["serve"], env, 30_000)));
    db = new PostgresDriver({ url: schema.url, pool_connections_max: 2 });
  });

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await Promise.all(gates.map((gate) => gate.stop("SIGTERM")));
    await simulator?.stop();
    await db?.close();
    await schema?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function api<T = Record<string, unknown>>(gate: number, method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${gates[gate]!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return (await response.json()) as T;
  }

  async function agentWithBlock(name: string, block: Record<string, unknown>) {
    const agent = await api<{ agent_id: string; token: string }>(0, "POST", "/api/v1/agents", { name });
    const created = await api<{ block_id: string }>(1, "POST", "/api/v1/blocks", {
      agent_id: agent.agent_id,
      currency: "INR",
      ttl_seconds: 3600,
      ...block,
    });
    return { ...agent, block_id: created.block_id };
  }

  async function mcp(gate: number, token: string): Promise<Client> {
    const client = new Client({ name: `pg-buyer-${gate}`, version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gates[gate]!.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    clients.push(client);
    return client;
  }

  async function logIsGapFree(): Promise<number> {
    const facts = await db.read(async (tx) => ({
      head: await tx.get<{ size: number }>("SELECT size FROM log_head WHERE id = 1"),
      rows: await tx.get<{ entries: number; low: number; high: number }>(
        "SELECT COUNT(*) AS entries, MIN(seq) AS low, MAX(seq) AS high FROM log_entries",
      ),
    }));
    const size = facts.head?.size ?? -1;
    expect(facts.rows).toEqual({ entries: size, low: 0, high: size - 1 });
    return size;
  }

  async function exportAndVerify(name: string): Promise<void> {
    const out = join(dir, `${name}.jsonl`);
    const checkpoint = join(dir, `${name}.cp`);
    const env = { BURSAR_DATA_DIR: join(dir, "gate-0"), BURSAR_DB: schema.url, BURSAR_SIGNING_KEY: envs[0]!.BURSAR_SIGNING_KEY! };
    const exported = await runBursar(["export", "--out", out, "--checkpoint", checkpoint], env);
    expect(exported.stderr).toBe("");
    expect(exported.code).toBe(0);
    const key = (await runBursar(["key"], env)).stdout.trim();
    const verified = await runBursar(["verify", out, "--checkpoint", checkpoint, "--key", key]);
    expect(verified.stderr + verified.stdout).not.toMatch(/FAIL|mismatch/i);
    expect(verified.code).toBe(0);
  }

  async function blockOf(block_id: string) {
    return api<{ reserved: number; spent: number; held: number; available: number }>(2, "GET", `/api/v1/blocks/${block_id}`);
  }

  it("400 concurrent create_order calls over 4 processes allow exactly the 25 that fit", async () => {
    const agent = await agentWithBlock("exact-fit", {
      reserved: 250_000,
      per_call_cap: 10_000,
      approval_threshold: 10_000,
      velocity: { max_calls: 1_000, window_seconds: 60 },
    });
    const buyers = await Promise.all(gates.map((_, gate) => mcp(gate, agent.token)));
    const results = await Promise.all(
      Array.from({ length: 400 }, (_, index) =>
        buyers[index % gates_count]!.callTool({
          name: "create_order",
          arguments: { amount: 10_000, currency: "INR", idempotency_key: `fit-${index}` },
        }),
      ),
    );
    const verdicts = results.map((result) => result.structuredContent as Structured);
    const allowed = verdicts.filter((verdict) => verdict.effect === "ALLOW");
    expect(allowed.length).toBe(25);
    // Everything else was refused by R1 (the block is full), never by an error.
    expect(verdicts.filter((verdict) => verdict.effect !== "ALLOW").map((verdict) => verdict.rule)).toEqual(Array(375).fill("R1"));
    const block = await blockOf(agent.block_id);
    expect(block).toMatchObject({ reserved: 250_000, held: 250_000, spent: 0, available: 0 });
    const sums = await db.read((tx) =>
      tx.get<{ held: number; count: number }>(
        "SELECT COALESCE(SUM(amount), 0) AS held, COUNT(*) AS count FROM reservations WHERE block_id = ? AND status = 'held'",
        [agent.block_id],
      ),
    );
    expect(sums).toEqual({ held: 250_000, count: 25 });
    const decisions = await db.read((tx) =>
      tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM log_entries WHERE kind = 'gate.decision' AND entry_text LIKE ?", [
        `%"block_id":"${agent.block_id}"%`,
      ]),
    );
    expect(decisions?.count).toBe(400);
    await logIsGapFree();
    await exportAndVerify("exact-fit");
  });

  it("a process killed with SIGKILL mid-run loses nothing and applies nothing twice", async () => {
    const agent = await agentWithBlock("crash", {
      reserved: 10_000_000,
      per_call_cap: 100_000,
      approval_threshold: 100_000,
      velocity: { max_calls: 1_000, window_seconds: 60 },
    });
    await fetch(`${simulator.url}/sim/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ latency_ms: 300 }) });
    const buyers = await Promise.all(gates.map((_, gate) => mcp(gate, agent.token)));
    const args = (index: number) => ({ amount: 1_000 + index, currency: "INR", idempotency_key: `kill-${index}` });
    const calls = Array.from({ length: 100 }, (_, index) =>
      buyers[index % gates_count]!.callTool({ name: "create_order", arguments: args(index) }).catch(() => "lost" as const),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await gates[2]!.stop("SIGKILL");
    const first = await Promise.all(calls);
    await fetch(`${simulator.url}/sim/faults`, { method: "DELETE" });
    expect(first.filter((result) => result === "lost").length).toBeGreaterThan(0);

    // Restart on the same port after the leases (3 × 1 s) ran out.
    await new Promise((resolve) => setTimeout(resolve, 3_200));
    gates[2] = await startBursar(["serve"], envs[2]!, 30_000);
    // Every call is retried with its key on a live process: replays, never a second hold.
    const retry = await mcp(3, agent.token);
    const second = await Promise.all(Array.from({ length: 100 }, (_, index) => retry.callTool({ name: "create_order", arguments: args(index) })));
    for (const result of second) expect((result.structuredContent as Structured).effect).toBe("ALLOW");

    const facts = await db.read(async (tx) => ({
      reservations: await tx.get<{ count: number; held: number }>(
        "SELECT COUNT(*) AS count, COALESCE(SUM(amount), 0) AS held FROM reservations WHERE block_id = ? AND status = 'held'",
        [agent.block_id],
      ),
      keys: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM idempotency_keys WHERE agent_id = ? AND status = 'stored'", [agent.agent_id]),
      in_flight: await tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM idempotency_keys WHERE status = 'in_flight'"),
      orphans: await tx.get<{ count: number }>(
        "SELECT COUNT(*) AS count FROM reservations WHERE block_id = ? AND status = 'held' AND order_id IS NULL AND outcome_unknown = 0",
        [agent.block_id],
      ),
      ids: await tx.all<{ reservation_id: string }>("SELECT reservation_id FROM reservations WHERE block_id = ?", [agent.block_id]),
    }));
    // Nothing lost and nothing twice: one hold per key, the block's held equals their sum.
    expect(facts.reservations?.count).toBe(100);
    expect(facts.keys?.count).toBe(100);
    expect(facts.in_flight?.count).toBe(0);
    expect(facts.orphans?.count).toBe(0);
    const block = await blockOf(agent.block_id);
    expect(block.held).toBe(facts.reservations?.held);
    expect(block.held + block.spent).toBeLessThanOrEqual(block.reserved);
    const basic = `Basic ${Buffer.from("rzp_test_pgmulti:x").toString("base64")}`;
    // At the provider too: no reservation has more than one order (its receipt is the reservation id).
    for (const { reservation_id } of facts.ids) {
      const found = (await (await fetch(`${simulator.url}/v1/orders?receipt=${reservation_id}`, { headers: { authorization: basic } })).json()) as {
        items: unknown[];
      };
      expect(found.items.length).toBeLessThanOrEqual(1);
    }
    await logIsGapFree();
    await exportAndVerify("after-kill");
  });

  it("a webhook on one process and the capture on another settle each payment exactly once", async () => {
    const agent = await agentWithBlock("race", {
      reserved: 1_000_000,
      per_call_cap: 50_000,
      approval_threshold: 50_000,
      velocity: { max_calls: 1_000, window_seconds: 60 },
    });
    const buyer = await mcp(1, agent.token);
    const rounds = 8;
    const payments = await Promise.all(
      Array.from({ length: rounds }, async (_, index) => {
        const created = await buyer.callTool({ name: "create_order", arguments: { amount: 20_000, currency: "INR", idempotency_key: `race-${index}` } });
        const order = (created.structuredContent as { order: { id: string } }).order;
        const paid = await fetch(`${simulator.url}/sim/orders/${order.id}/pay`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ card: "4111111111111111" }),
        });
        return ((await paid.json()) as { razorpay_payment_id: string }).razorpay_payment_id;
      }),
    );
    // Each capture (gate 1) makes the simulator send payment.captured and order.paid to gate 0 at once.
    const captured = await Promise.all(
      payments.map((payment_id) => buyer.callTool({ name: "capture_payment", arguments: { payment_id, amount: 20_000, currency: "INR" } })),
    );
    for (const result of captured) expect((result.structuredContent as Structured).effect).toBe("ALLOW");
    // Wait until gate 0 has taken both webhooks for every payment.
    const deadline = Date.now() + 15_000;
    for (;;) {
      const seen = await db.read((tx) =>
        tx.get<{ count: number }>(
          `SELECT COUNT(*) AS count FROM webhook_events WHERE event IN ('payment.captured', 'order.paid') AND payment_id IN (${payments.map(() => "?").join(", ")})`,
          payments,
        ),
      );
      if (Number(seen?.count ?? 0) >= 2 * rounds) break;
      if (Date.now() > deadline) throw new Error(`gate 0 took ${String(seen?.count)} of the ${2 * rounds} webhooks within 15 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const commits = await db.read((tx) =>
      tx.all<{ entry_text: string }>("SELECT entry_text FROM log_entries WHERE kind = 'gate.settlement' AND entry_text LIKE ?", [
        `%"action":"commit"%"block_id":"${agent.block_id}"%`,
      ]),
    );
    const committed = await db.read((tx) =>
      tx.get<{ count: number }>("SELECT COUNT(*) AS count FROM reservations WHERE block_id = ? AND status = 'committed'", [agent.block_id]),
    );
    expect(committed?.count).toBe(rounds);
    expect(commits.length).toBe(rounds);
    const block = await blockOf(agent.block_id);
    expect(block).toMatchObject({ spent: rounds * 20_000, held: 0 });
    const webhooks = await db.read((tx) =>
      tx.all<{ outcome: string; payment_id: string }>(
        `SELECT outcome, payment_id FROM webhook_events WHERE event IN ('payment.captured', 'order.paid') AND payment_id IN (${payments.map(() => "?").join(", ")})`,
        payments,
      ),
    );
    // Two webhooks per payment, each settling it or finding it settled (by the capture or the other webhook).
    expect(webhooks).toHaveLength(2 * rounds);
    for (const payment_id of payments) {
      const outcomes = webhooks.filter((row) => row.payment_id === payment_id).map((row) => row.outcome);
      expect(outcomes, payment_id).toHaveLength(2);
      expect(outcomes.every((outcome) => ["applied", "noop"].includes(outcome)), payment_id).toBe(true);
      expect(outcomes.filter((outcome) => outcome === "applied").length, payment_id).toBeLessThanOrEqual(1);
    }
    await logIsGapFree();
    await exportAndVerify("race");
  });
});
