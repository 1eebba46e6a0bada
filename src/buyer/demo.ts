// `bursar demo`: the simulator, the gate and the scripted buyer in one process on a temporary
// data directory. It tells the story — allowed, held and approved, refused by rule, paid,
// captured, settled — then exports the evidence log and verifies it offline.

import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../config.js";
import { exportLog, verifyExportFile } from "../evidence/index.js";
import { newToken } from "../ids.js";
import { test_card_success } from "../provider/simulator/index.js";
import { startServer, type Started } from "../server/start.js";
import { connect } from "./connect.js";
import { buyBasket, emptyReport, type BuyerReport } from "./scripted.js";
import { money, Story } from "./story.js";

export interface DemoResult {
  report: BuyerReport;
  settled: number;
  verified: boolean;
  entries: number;
}

type Structured = Record<string, unknown>;

async function operator(started: Started, token: string, method: string, path: string, body?: unknown): Promise<Structured> {
  const response = await fetch(`${started.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return (await response.json()) as Structured;
}

async function approveHeld(story: Story, started: Started, admin: string, client: Client, report: BuyerReport): Promise<void> {
  for (const held of report.held) {
    story.note(`an operator reviews ${held.approval_id} and approves it (POST /api/v1/approvals/${held.approval_id}/approve)`);
    const approved = await operator(started, admin, "POST", `/api/v1/approvals/${held.approval_id}/approve`);
    const state = (await client.callTool({ name: "get_approval", arguments: { approval_id: held.approval_id } })).structuredContent as Structured;
    const order = (state.result as { order?: { id: string } } | undefined)?.order;
    story.step("APPROVE", "green", `${held.approval_id} ${String(state.state)}: order ${order?.id ?? "?"} for ${money(held.amount)} forwarded once`);
    if (approved.error) story.note(JSON.stringify(approved.error));
    if (order) report.orders.push({ id: order.id, amount: held.amount, name: "approved item" });
  }
}

async function refusals(story: Story, client: Client, report: BuyerReport): Promise<void> {
  const attempts: Array<[string, Record<string, unknown>]> = [
    ["a laptop over the per-call cap", { amount: 650_000, currency: "INR" }],
    ["a gift card in another currency", { amount: 10_000, currency: "USD" }],
    ["a transfer to another account", { amount: 10_000, currency: "INR", transfers: [{ account: "acc_Attacker", amount: 10_000 }] }],
  ];
  const block = (await client.callTool({ name: "get_block", arguments: {} })).structuredContent as { available: number };
  attempts.push(["one paisa more than the block has left", { amount: block.available + 1, currency: "INR" }]);
  for (const [what, args] of attempts) {
    const structured = (await client.callTool({ name: "create_order", arguments: args })).structuredContent as Structured;
    story.result(`create_order ${what} (${money(args.amount, args.currency)})`, structured);
    if (structured.effect === "BLOCK") report.refusals.push({ rule: String(structured.rule), reason: String(structured.reason) });
  }
}

async function payAndCapture(story: Story, started: Started, client: Client, order: { id: string; amount: number; name: string }): Promise<number> {
  const paid = (await (
    await fetch(`${started.url}/simulator/sim/orders/${order.id}/pay`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ card: test_card_success }),
    })
  ).json()) as { razorpay_payment_id: string };
  story.step("PAY", "cyan", `${order.name}: paid in the simulator's test checkout with card 4111 1111 1111 1111 → ${paid.razorpay_payment_id} (authorized, not captured)`);
  const captured = (await client.callTool({
    name: "capture_payment",
    arguments: { payment_id: paid.razorpay_payment_id, amount: order.amount, currency: "INR" },
  })).structuredContent as Structured;
  story.result(`capture_payment ${paid.razorpay_payment_id} ${money(order.amount)}`, captured);
  await started.simulator?.deliverWebhooksNow();
  const events = await started.bursar.driver.read((tx) =>
    tx.all<{ event: string; outcome: string }>("SELECT event, outcome FROM webhook_events WHERE payment_id = ? ORDER BY received_at_ms", [paid.razorpay_payment_id]),
  );
  for (const event of events) {
    const moves = event.event === "payment.captured" || event.event === "order.paid";
    const meaning = event.outcome === "applied" ? "settled held into spent" : moves ? "already settled by the capture: applied exactly once" : "audited; no money moves on this event";
    story.step("WEBHOOK", "cyan", `${event.event}: signature verified, ${meaning}`);
  }
  return captured.effect === "ALLOW" ? 1 : 0;
}

async function verifyLog(story: Story, started: Started, dir: string): Promise<{ verified: boolean; entries: number }> {
  const checkpoint = await started.bursar.log.checkpoint();
  const path = join(dir, "evidence.jsonl");
  let text = "";
  await exportLog(started.bursar.driver, { size: checkpoint.size, exported_at: new Date().toISOString(), write: async (piece) => void (text += piece) });
  writeFileSync(path, text);
  const report = verifyExportFile(path, { checkpoint: checkpoint.note, key: started.bursar.log.verifierKey });
  story.heading("Evidence");
  story.step(report.ok ? "VERIFY" : "FAILED", report.ok ? "green" : "red", `${report.entries} log entries recomputed offline against the signed checkpoint${report.ok ? ": every leaf and the root match" : `: ${JSON.stringify(report.failure)}`}`);
  story.note(`verifier key ${started.bursar.log.verifierKey}`);
  story.line();
  for (const line of checkpoint.note.trimEnd().split("\n")) story.line(`    ${line}`);
  return { verified: report.ok, entries: report.entries };
}

/**
 * A demo in progress: `result` settles when the story is told; `stop()` (idempotent) closes the
 * buyer's client and the servers and deletes the temporary data directory, whenever it is
 * called — mid-story on SIGINT/SIGTERM, or when the story ends.
 */
export interface DemoRun {
  /** The temporary data directory (deleted by stop()). */
  dir: string;
  result: Promise<DemoResult>;
  stop(): Promise<void>;
}

export function startDemo(out: NodeJS.WritableStream, interactive: boolean): DemoRun {
  const dir = mkdtempSync(join(tmpdir(), "bursar-demo-"));
  const admin = newToken("bsr_op");
  const starting = startServer(loadConfig({ BURSAR_DATA_DIR: dir, BURSAR_PORT: "0", BURSAR_ADMIN_TOKEN: admin }), { logger: false });
  let client: Client | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      try {
        await client?.close().catch(() => undefined);
        // A server still starting is closed once it has started; one that failed to start has nothing to close.
        const started = await starting.catch(() => undefined);
        await started?.app.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })());
  const result = (async () => {
    try {
      const started = await starting;
      return await tellStory(new Story({ out, interactive }), started, admin, dir, (connected) => {
        if (stopping) void connected.close().catch(() => undefined);
        else client = connected;
      });
    } finally {
      await stop();
    }
  })();
  return { dir, result, stop };
}

export async function runDemo(out: NodeJS.WritableStream, interactive: boolean): Promise<DemoResult> {
  return startDemo(out, interactive).result;
}

async function tellStory(story: Story, started: Started, admin: string, dir: string, connected: (client: Client) => void): Promise<DemoResult> {
  story.heading("Bursar demo — an AI buyer with a prepaid spending block (simulator, no key, no network)");
  const agent = await started.bursar.operator.createAgent({ name: "demo-buyer" });
  const block = await started.bursar.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, per_call_cap: 500_000, approval_threshold: 200_000, velocity: { max_calls: 30, window_seconds: 60 } });
  story.note(`gate ${started.url}; block ${block.block_id}: ${money(block.reserved)}, per call ≤ ${money(block.per_call_cap)}, approval above ${money(block.approval_threshold)}`);
  const client = await connect({ kind: "http", url: started.url, token: agent.token });
  connected(client);
  story.heading("The basket");
  const report = await buyBasket(client, { story }, emptyReport());
  await approveHeld(story, started, admin, client, report);
  story.heading("Attempts the rules refuse");
  await refusals(story, client, report);
  story.heading("Payment and settlement");
  const keyboard = report.orders.find((order) => order.name === "Mechanical keyboard") ?? report.orders[0];
  const settled = keyboard ? await payAndCapture(story, started, client, keyboard) : 0;
  const final = await started.bursar.operator.getBlock(block.block_id);
  story.note(`block now: spent ${money(final.spent)}, held ${money(final.held)}, available ${money(final.available)}`);
  const evidence = await verifyLog(story, started, dir);
  story.line();
  story.line(`${report.allowed} allowed, ${report.held.length} held and approved, ${report.refusals.length} refused (${[...new Set(report.refusals.map((refusal) => refusal.rule))].join(", ")}), ${settled} settled, log ${evidence.verified ? "verified" : "NOT verified"}.`);
  return { report, settled, verified: evidence.verified, entries: evidence.entries };
}
