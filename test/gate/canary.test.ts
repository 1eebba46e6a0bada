// Nothing secret is written down: canary values in the Razorpay key secret, the webhook
// secret (and the one a rotation replaced), the operator token, the agent token and an Authorization header never appear in
// the process's logs, the database file or the exported evidence log, not even when the agent
// copies the configured secrets into its notes.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar, startBursar, type BursarProcess } from "../support/process.js";
import { waitUntil } from "../support/wait.js";

const canary = {
  key_secret: "CANARY-KEY-SECRET-7f3a9c",
  webhook_secret: "CANARY-WEBHOOK-SECRET-51be02",
  webhook_secret_previous: "CANARY-WEBHOOK-PREVIOUS-3e7d19",
  admin_token: "CANARY-OPERATOR-TOKEN-c0ffee42",
  header: "CANARY-AUTH-HEADER-9d8e7f",
};

describe("secrets never written down", () => {
  let dir: string;
  let simulator: BursarProcess;
  let gate: BursarProcess;
  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-canary-"));
    const gate_port = await freePort();
    // The simulator signs with the secret a rotation replaced, as Razorpay signs the retries of
    // events first sent before one: the gate, given it as RAZORPAY_WEBHOOK_SECRET_PREVIOUS, takes them.
    simulator = await startBursar(
      ["simulator", "--port", "0", "--webhook-url", `http://127.0.0.1:${gate_port}/webhooks/razorpay`, "--webhook-secret", canary.webhook_secret_previous],
      {},
    );
    gate = await startBursar(["serve"], {
      BURSAR_DATA_DIR: dir,
      BURSAR_PORT: String(gate_port),
      BURSAR_ADMIN_TOKEN: canary.admin_token,
      BURSAR_PROVIDER: "razorpay",
      RAZORPAY_KEY_ID: "rzp_test_canary",
      RAZORPAY_KEY_SECRET: canary.key_secret,
      RAZORPAY_BASE_URL: simulator.url,
      RAZORPAY_WEBHOOK_SECRET: canary.webhook_secret,
      RAZORPAY_WEBHOOK_SECRET_PREVIOUS: canary.webhook_secret_previous,
      BURSAR_LOG_LEVEL: "debug",
    });
  });
  afterAll(async () => {
    await gate?.stop();
    await simulator?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps every canary out of logs, the database and the export", async () => {
    const api = async (path: string, body: unknown, token = canary.admin_token) =>
      (await fetch(`${gate.url}${path}`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) })).json() as Promise<Record<string, string>>;
    const agent = await api("/api/v1/agents", { name: "canary" });
    await api("/api/v1/blocks", { agent_id: agent.agent_id, currency: "INR", reserved: 100_000 });
    await api("/api/v1/agents", { name: "x" }, canary.header);
    await fetch(`${gate.url}/mcp`, { method: "POST", headers: { authorization: `Bearer ${canary.header}`, "content-type": "application/json" }, body: "{}" });

    const client = new Client({ name: "canary", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gate.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.token}` } } }));
    const created = await client.callTool({
      name: "create_order",
      arguments: {
        amount: 5_000,
        currency: "INR",
        // The agent's own token glued to a word too, where a word boundary does not match.
        notes: {
          authorization: `Bearer ${canary.header}`,
          api_key: canary.key_secret,
          ref: `x_${agent.token}`,
          ref2: `9${agent.token}`,
          // Bursar's own configured secrets under names that look like nothing: redacted as what they are.
          memo: `see ${canary.key_secret}`,
          memo2: canary.webhook_secret,
          memo3: `op:${canary.admin_token}`,
          memo4: canary.webhook_secret_previous,
        },
        receipt: `order_${agent.token}`,
      },
    });
    await fetch(`${gate.url}/mcp?x=_${agent.token}`, { method: "POST", headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" }, body: "{}" });
    const order_id = ((created.structuredContent as Record<string, unknown>).order as { id: string }).id;
    const paid = (await (await fetch(`${simulator.url}/sim/orders/${order_id}/pay`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ card: "4111111111111111" }) })).json()) as { razorpay_payment_id: string };
    const captured = await client.callTool({ name: "capture_payment", arguments: { payment_id: paid.razorpay_payment_id, amount: 5_000, currency: "INR" } });
    expect(captured.structuredContent).toMatchObject({ effect: "ALLOW" });
    // The payment's webhooks (authorized, captured, and order.paid with the order's notes): wait
    // until the gate has processed every one (the simulator marks an event delivered on the gate's 2xx,
    // which the gate sends once the event is recorded), so their traces are in what is checked below.
    const webhooks = await waitUntil("the gate to process the payment's three webhooks", async () => {
      const outbox = (await (await fetch(`${simulator.url}/sim/webhooks`)).json()) as { items: Array<{ event_id: string; event: string; body: string; state: string }> };
      const mine = outbox.items.filter((entry) => entry.body.includes(paid.razorpay_payment_id));
      return mine.length >= 3 && mine.every((entry) => entry.state === "delivered") ? mine : undefined;
    });
    expect(webhooks.map((entry) => entry.event).sort()).toEqual(["order.paid", "payment.authorized", "payment.captured"]);
    await client.close();
    await gate.stop();

    const out = join(dir, "export.jsonl");
    const exported = await runBursar(["export", "--out", out], { BURSAR_DATA_DIR: dir });
    expect(exported.code).toBe(0);

    const secrets = [...Object.values(canary), agent.token];
    const places: Record<string, string> = { logs: gate.output() + exported.stdout + exported.stderr, export: readFileSync(out, "latin1") };
    for (const file of readdirSync(dir).filter((name) => name.startsWith("bursar.db"))) places[file] = readFileSync(join(dir, file), "latin1");
    expect(places.logs).toContain("\"level\"");
    // The webhooks waited for are in the evidence checked.
    for (const webhook of webhooks) expect(places.export).toContain(webhook.event_id);
    for (const [place, text] of Object.entries(places)) {
      for (const secret of secrets) expect(text.includes(secret as string), `${secret} found in ${place}`).toBe(false);
    }
  });
});
