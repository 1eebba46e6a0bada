// A graceful stop while money calls are at the provider and their clients have gone away: the
// calls finish, their answers are recorded, and only then does the database close. An HTTP
// request ends for the server when its client disconnects, but its money call goes on.

import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, startBursar } from "../support/process.js";

const admin = "stop-abandoned-operator-token-0123";
const webhook_secret = "stop-abandoned-webhook-secret";
const scratch = mkdtempSync(join(tmpdir(), "bursar-stop-abandoned-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("a graceful stop with money calls whose clients went away", () => {
  it("finishes them and records the provider's answers before closing the database, then exits 0", async () => {
    ensureBuilt();
    const gate_port = await freePort();
    const simulator = await startBursar(["simulator", "--port", "0", "--webhook-url", `http://127.0.0.1:${gate_port}/webhooks/razorpay`, "--webhook-secret", webhook_secret], {});
    const data_dir = join(scratch, "data");
    try {
      const gate = await startBursar(["serve", "--port", String(gate_port)], {
        BURSAR_DATA_DIR: data_dir,
        BURSAR_ADMIN_TOKEN: admin,
        BURSAR_PROVIDER: "razorpay",
        RAZORPAY_KEY_ID: "rzp_test_stop",
        RAZORPAY_KEY_SECRET: "stop-secret",
        RAZORPAY_BASE_URL: simulator.url,
        RAZORPAY_WEBHOOK_SECRET: webhook_secret,
        BURSAR_PROVIDER_TIMEOUT_MS: "5000",
      });
      const api = async <T>(path: string, body: unknown): Promise<T> => {
        const response = await fetch(`${gate.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" }, body: JSON.stringify(body) });
        expect(response.status, path).toBeLessThan(300);
        return (await response.json()) as T;
      };
      const agent = await api<{ agent_id: string; token: string }>("/api/v1/agents", { name: "leaver" });
      await api("/api/v1/blocks", { agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000 });
      const faults = await fetch(`${simulator.url}/sim/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ latency_ms: 1_500, only_routes: ["POST /v1/orders"] }) });
      expect(faults.status).toBeLessThan(300);
      // Three create_order calls whose clients hang up at 300 ms, while the provider takes 1.5 s.
      const calls = [0, 1, 2].map(async (index) => {
        const body = { jsonrpc: "2.0", id: index, method: "tools/call", params: { name: "create_order", arguments: { amount: 1_000 + index, currency: "INR", idempotency_key: `leaver-${index}` } } };
        const request = fetch(`${gate.url}/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${agent.token}` },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(300),
        });
        await request.then((response) => response.text()).catch(() => "gone");
      });
      await Promise.all(calls);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // It exited 0 at once, the database closed under the three calls: keys left in flight, holds
      // with no order though the provider made all three, and no order.ok entry for any.
      expect(await gate.stop("SIGTERM")).toBe(0);
      const db = new Database(join(data_dir, "bursar.db"), { readonly: true });
      try {
        const count = (sql: string) => (db.prepare(sql).get() as { count: number }).count;
        expect(count("SELECT COUNT(*) AS count FROM idempotency_keys WHERE status = 'in_flight'")).toBe(0);
        expect(count("SELECT COUNT(*) AS count FROM reservations WHERE status = 'held' AND order_id IS NOT NULL")).toBe(3);
        expect(count("SELECT COUNT(*) AS count FROM log_entries WHERE kind = 'gate.settlement' AND entry_text LIKE '%\"action\":\"order.ok\"%'")).toBe(3);
      } finally {
        db.close();
      }
      expect(gate.output()).not.toContain("database connection is not open");
    } finally {
      await simulator.stop();
    }
  });
});
