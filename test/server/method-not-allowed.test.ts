// A path the server answers, asked with a method it does not take, is 405 with an Allow header
// naming the methods it does take (RFC 9110 §15.5.6), as /mcp already answered; a path no route
// answers stays 404.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

describe("a known path with another method", () => {
  const cases: Array<[string, string, string]> = [
    ["DELETE", "/api/v1/blocks/blk_x", "GET, HEAD"],
    ["GET", "/api/v1/blocks/blk_x/revoke", "POST"],
    ["PUT", "/api/v1/approvals/apr_x/approve", "POST"],
    ["GET", "/webhooks/razorpay", "POST"],
    ["POST", "/healthz", "GET, HEAD"],
  ];
  for (const [method, path, allow] of cases) {
    it(`${method} ${path} → 405, Allow: ${allow}`, async () => {
      const response = await fetch(`${server.url}${path}`, { method });
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe(allow);
      expect(await response.json()).toEqual({
        error: { code: "method_not_allowed", message: `${method} is not allowed on ${path}; it takes ${allow}`, details: { allow: allow.split(", ") } },
      });
    });
  }

  it("a path no route answers is 404", async () => {
    for (const [method, path] of [["GET", "/api/v1/nothing"], ["DELETE", "/api/v1/blocks/blk_x/extra"]] as const) {
      const response = await fetch(`${server.url}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
    }
  });
});
