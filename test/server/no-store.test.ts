// Answers under /api/v1 say `Cache-Control: no-store`: several show a secret once (an agent's
// token, an auditor's token, an evidence source's keys), which no browser or proxy cache may keep.
// A route that sets its own Cache-Control keeps it.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

async function post(path: string, body: unknown, token = operator_token): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("answers that show a secret once are not cached", () => {
  it("POST /api/v1/agents (the agent token)", async () => {
    const response = await post("/api/v1/agents", { name: "no-store-agent" });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ token: expect.any(String) });
    expect(response.headers.get("cache-control")).toBe("no-store");
  });

  it("POST /api/v1/auditor-tokens (the auditor token)", async () => {
    const response = await post("/api/v1/auditor-tokens", { name: "no-store-auditor" });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({ token: expect.any(String) });
    expect(response.headers.get("cache-control")).toBe("no-store");
  });

  it("POST /api/v1/evidence-sources and …/rotate (the source's signing and API keys)", async () => {
    const created = await post("/api/v1/evidence-sources", { kind: "decisions", name: "no-store-source" });
    expect(created.status).toBe(201);
    const source = (await created.json()) as { id: string; signing_key: string; api_key: string };
    expect(source).toMatchObject({ signing_key: expect.any(String), api_key: expect.any(String) });
    expect(created.headers.get("cache-control")).toBe("no-store");
    const rotated = await post(`/api/v1/evidence-sources/${source.id}/rotate`, {});
    expect(rotated.status).toBe(200);
    expect(await rotated.json()).toMatchObject({ signing_key: expect.any(String), api_key: expect.any(String) });
    expect(rotated.headers.get("cache-control")).toBe("no-store");
  });
});

describe("every /api/v1 answer says no-store", () => {
  it("reads, refusals and unknown /api/v1 paths too; other paths are left alone", async () => {
    const read = await fetch(`${server.url}/api/v1/inbox`, { headers: { authorization: `Bearer ${operator_token}` } });
    const refused = await post("/api/v1/agents", { name: "x" }, "not-the-operator");
    const unknown = await fetch(`${server.url}/api/v1/nope`);
    const checkpoint = await fetch(`${server.url}/api/v1/log/checkpoint`);
    expect([read.status, refused.status, unknown.status, checkpoint.status]).toEqual([200, 401, 404, 200]);
    for (const response of [read, refused, unknown, checkpoint]) expect(response.headers.get("cache-control")).toBe("no-store");
    const health = await fetch(`${server.url}/healthz`);
    expect(health.headers.get("cache-control")).toBeNull();
  });
});
