// HOLD and human approval over HTTP: the amount is held, approve forwards exactly once
// (a second approve is 409), deny and expiry release, and the agent learns the outcome
// with get_approval or by repeating the call.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testServer, type TestServer } from "../support/server.js";

type Structured = Record<string, unknown>;
let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

async function heldCall(name: string, key = "big-1") {
  const agent = await server.agent(name, { approval_threshold: 10_000 });
  const client = await server.client(agent.token);
  const args = { amount: 15_000, currency: "INR", idempotency_key: key };
  const result = await client.callTool({ name: "create_order", arguments: args });
  return { agent, client, args, structured: result.structuredContent as Structured };
}

const block = async (block_id: string) => (await server.api<Record<string, number>>("GET", `/api/v1/blocks/${block_id}`)).body;

describe("approvals", () => {
  it("HOLD holds the amount; approve forwards once; a second approve is 409", async () => {
    const { agent, client, args, structured } = await heldCall("apr-approve");
    expect(structured).toMatchObject({ effect: "HOLD", rule: "HOLD", approval_id: expect.stringMatching(/^apr_/) });
    expect(await block(agent.block_id)).toMatchObject({ held: 15_000 });
    const approval_id = structured.approval_id as string;
    const pending = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=pending");
    expect(pending.body.approvals.map((row) => row.approval_id)).toContain(approval_id);

    const [first, second] = await Promise.all([
      server.api("POST", `/api/v1/approvals/${approval_id}/approve`),
      server.api("POST", `/api/v1/approvals/${approval_id}/approve`),
    ]);
    expect([first.status, second.status].sort()).toEqual([200, 409]);
    expect(server.started.simulator!.state.orders().filter((order) => order.amount === 15_000)).toHaveLength(1);

    const state = await client.callTool({ name: "get_approval", arguments: { approval_id } });
    expect(state.structuredContent).toMatchObject({ approval_id, state: "approved", result: { order: { amount: 15_000 } } });
    const replay = await client.callTool({ name: "create_order", arguments: args });
    expect(replay.structuredContent).toMatchObject({ effect: "ALLOW", replayed: true, order: { amount: 15_000 } });
    expect(await block(agent.block_id)).toMatchObject({ held: 15_000, spent: 0 });
  });

  it("deny releases the hold and the agent sees it denied", async () => {
    const { agent, client, args, structured } = await heldCall("apr-deny");
    const approval_id = structured.approval_id as string;
    expect((await server.api("POST", `/api/v1/approvals/${approval_id}/deny`)).status).toBe(200);
    expect(await block(agent.block_id)).toMatchObject({ held: 0 });
    expect((await client.callTool({ name: "get_approval", arguments: { approval_id } })).structuredContent).toMatchObject({ state: "denied" });
    expect((await client.callTool({ name: "create_order", arguments: args })).structuredContent).toMatchObject({
      effect: "BLOCK",
      rule: "HOLD",
      approval_state: "denied",
    });
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
    expect(await block(agent.block_id)).toMatchObject({ held: 0, spent: 0 });
    const denied = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=denied");
    expect(denied.body.approvals.map((row) => row.approval_id)).toContain(approval_id);
  });

  it("another agent cannot read an approval", async () => {
    const { structured } = await heldCall("apr-owner");
    const other = await server.agent("apr-other");
    const client = await server.client(other.token);
    const result = await client.callTool({ name: "get_approval", arguments: { approval_id: structured.approval_id } });
    expect(result.structuredContent).toMatchObject({ effect: "BLOCK", rule: "CALLER" });
  });
});
