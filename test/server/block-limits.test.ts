// POST /api/v1/blocks names the field and its range for every whole-number field, whatever is
// wrong with the number: a fraction or a number past 2^53 were answered by the body schema first
// ("expected int, received number", "Too big: expected int to be <=9007199254740991"), which named
// no range, or the wrong one.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
let agent_id: string;
beforeAll(async () => {
  server = await testServer();
  agent_id = (await server.api<{ agent_id: string }>("POST", "/api/v1/agents", { name: "limits" })).body.agent_id;
});
afterAll(async () => server.close());

const refused: Array<[string, Record<string, unknown>, string]> = [
  ["ttl_seconds of 1e308", { ttl_seconds: 1e308 }, "ttl_seconds: must be a whole number from 1 to 7776000, got 1e+308"],
  ["ttl_seconds of 1.5", { ttl_seconds: 1.5 }, "ttl_seconds: must be a whole number from 1 to 7776000, got 1.5"],
  ["ttl_seconds of 0", { ttl_seconds: 0 }, "ttl_seconds: must be a whole number from 1 to 7776000, got 0"],
  ["reserved of 1e308", { reserved: 1e308 }, "reserved: must be a whole number from 100 to 1000000000000, got 1e+308"],
  ["reserved of 2^53", { reserved: 2 ** 53 }, "reserved: must be a whole number from 100 to 1000000000000, got 9007199254740992"],
  ["reserved of -1", { reserved: -1 }, "reserved: must be a whole number from 100 to 1000000000000, got -1"],
  ["per_call_cap of 100.5", { per_call_cap: 100.5 }, "per_call_cap: must be a whole number from 100 to 1000000000, got 100.5"],
  ["approval_threshold of -0.5", { approval_threshold: -0.5 }, "approval_threshold: must be a whole number from 0 to 1000000000000, got -0.5"],
  ["velocity.max_calls of 2.5", { velocity: { max_calls: 2.5 } }, "velocity.max_calls: must be a whole number from 1 to 1000000, got 2.5"],
];

describe("POST /api/v1/blocks: whole-number fields", () => {
  for (const [name, fields, message] of refused) {
    it(`refuses ${name}, naming the field and its range`, async () => {
      const answer = await server.api("POST", "/api/v1/blocks", { agent_id, currency: "INR", ...fields });
      expect(answer).toEqual({ status: 422, body: { error: { code: "validation_failed", message, details: { field: message.slice(0, message.indexOf(":")) } } } });
    });
  }

  it("still refuses a number written as text by type", async () => {
    const answer = await server.api<{ error: { code: string; message: string } }>("POST", "/api/v1/blocks", { agent_id, currency: "INR", reserved: "1000" });
    expect(answer.status).toBe(422);
    expect(answer.body.error.message).toMatch(/^reserved: /);
  });
});
