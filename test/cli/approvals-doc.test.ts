// The HOLD approval flow README.md and docs/clients.md show: `bursar buyer --scripted` leaves
// one call held; GET /api/v1/approvals?state=pending lists it, POST …/approve forwards it once,
// and a later POST …/deny answers 409 approval_decided. Each request as the docs write it:
// the operator token as `authorization: Bearer $BURSAR_ADMIN_TOKEN` (server.api sends it so).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

describe("approving a HOLD as README.md and docs/clients.md show it", () => {
  let server: TestServer;
  beforeAll(async () => {
    ensureBuilt();
    server = await testServer();
  });
  afterAll(() => server.close());

  it("lists the held call as pending, approves it into an order, then refuses to deny it", async () => {
    const agent = await server.agent("buyer-1");
    const buyer = await runBursar(["buyer", "--scripted"], { BURSAR_URL: server.url, BURSAR_AGENT_TOKEN: agent.token });
    expect(buyer.code).toBe(0);
    expect(buyer.stdout).toContain("1 held");

    const pending = await server.api("GET", "/api/v1/approvals?state=pending");
    expect(pending.status).toBe(200);
    const approvals = pending.body.approvals as Array<{ approval_id: string; state: string; tool: string; agent_id: string }>;
    expect(approvals).toHaveLength(1);
    const [approval] = approvals;
    expect(approval).toMatchObject({ state: "pending", tool: "create_order", agent_id: agent.agent_id, approval_id: expect.stringMatching(/^apr_/) });

    const approved = await server.api("POST", `/api/v1/approvals/${approval?.approval_id}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ approval_id: approval?.approval_id, state: "approved", result: { order: { amount: 249_900, currency: "INR", status: "created" } } });

    const denied = await server.api("POST", `/api/v1/approvals/${approval?.approval_id}/deny`);
    expect(denied.status).toBe(409);
    expect(denied.body).toMatchObject({ error: { code: "approval_decided" } });
    expect((await server.api("GET", "/api/v1/approvals?state=pending")).body).toEqual({ approvals: [], next_cursor: null });
  });
});
