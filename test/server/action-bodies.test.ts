// The operator's action routes (revoke, unfreeze, approve, deny, check, disable, auditor revoke)
// take no body. One with keys, a deny's "reason" say, was dropped unread while the operator
// believed it recorded: it is refused 422 as any key a route does not take is, and nothing is done.
// No body, or `{}`, is the action as before.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

/** A call held for approval: its approval id and its agent's block. */
async function heldCall(name: string): Promise<{ approval_id: string; block_id: string }> {
  const agent = await server.agent(name, { approval_threshold: 10_000 });
  const client = await server.client(agent.token);
  const result = await client.callTool({ name: "create_order", arguments: { amount: 15_000, currency: "INR" } });
  return { approval_id: (result.structuredContent as { approval_id: string }).approval_id, block_id: agent.block_id };
}

describe("an action route given a body", () => {
  it("refuses keys it does not take, naming them, and does nothing", async () => {
    const { approval_id, block_id } = await heldCall("bodies-keys");
    const denied = await server.api<{ error: { code: string; message: string } }>("POST", `/api/v1/approvals/${approval_id}/deny`, { reason: "too expensive" });
    expect(denied).toMatchObject({ status: 422, body: { error: { code: "validation_failed", message: 'reason: Unrecognized key: "reason"' } } });
    const revoked = await server.api<{ error: { code: string } }>("POST", `/api/v1/blocks/${block_id}/revoke`, { force: true });
    expect(revoked).toMatchObject({ status: 422, body: { error: { code: "validation_failed" } } });
    // Neither happened: the approval still waits, the block is live.
    const pending = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=pending");
    expect(pending.body.approvals.map((row) => row.approval_id)).toContain(approval_id);
    expect((await server.api("GET", `/api/v1/blocks/${block_id}`)).body).toMatchObject({ revoked: false });
  });

  it("refuses a body that is not a JSON object, such as text", async () => {
    const { block_id } = await heldCall("bodies-text");
    for (const path of [`/api/v1/blocks/${block_id}/unfreeze`, `/api/v1/blocks/${block_id}/revoke`]) {
      const response = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${operator_token}`, "content-type": "text/plain" },
        body: "please",
      });
      expect(response.status, path).toBe(422);
      expect(await response.json()).toMatchObject({ error: { code: "validation_failed" } });
    }
    expect((await server.api("GET", `/api/v1/blocks/${block_id}`)).body).toMatchObject({ revoked: false });
  });

  it("refuses the JSON literal null, which is a body and not an object, and does nothing", async () => {
    const { approval_id, block_id } = await heldCall("bodies-null");
    for (const path of [`/api/v1/approvals/${approval_id}/deny`, `/api/v1/blocks/${block_id}/revoke`]) {
      const response = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${operator_token}`, "content-type": "application/json" },
        body: "null",
      });
      expect(response.status, path).toBe(422);
      expect(await response.json()).toMatchObject({ error: { code: "validation_failed", message: expect.stringMatching(/^\(body\): /) } });
    }
    const pending = await server.api<{ approvals: Array<{ approval_id: string }> }>("GET", "/api/v1/approvals?state=pending");
    expect(pending.body.approvals.map((row) => row.approval_id)).toContain(approval_id);
    expect((await server.api("GET", `/api/v1/blocks/${block_id}`)).body).toMatchObject({ revoked: false });
  });

  it("takes an empty body sent with Content-Type: application/json as no body", async () => {
    const { block_id } = await heldCall("bodies-empty-json");
    const response = await fetch(`${server.url}/api/v1/blocks/${block_id}/revoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${operator_token}`, "content-type": "application/json" },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ block_id, revoked: true });
  });

  it("an evidence source's disable refuses a body with keys, or null, and disables nothing", async () => {
    const created = await server.api<{ id: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "bodies-source" });
    const path = `/api/v1/evidence-sources/${created.body.id}/disable`;
    const keyed = await server.api<{ error: { code: string; message: string } }>("POST", path, { reason: "retired" });
    expect(keyed).toMatchObject({ status: 422, body: { error: { code: "validation_failed", message: 'reason: Unrecognized key: "reason"' } } });
    const response = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${operator_token}`, "content-type": "application/json" },
      body: "null",
    });
    expect(response.status).toBe(422);
    expect((await server.api("GET", `/api/v1/evidence-sources/${created.body.id}`)).body).toMatchObject({ disabled_at: null });
    expect((await server.api("POST", path)).body).toMatchObject({ disabled_at: expect.any(String) });
  });

  it("acts on no body and on {}", async () => {
    const { approval_id, block_id } = await heldCall("bodies-none");
    expect((await server.api("POST", `/api/v1/approvals/${approval_id}/deny`, {})).status).toBe(200);
    expect((await server.api("POST", `/api/v1/blocks/${block_id}/revoke`)).status).toBe(200);
    expect((await server.api("POST", `/api/v1/blocks/${block_id}/unfreeze`, {})).status).toBe(200);
  });
});
