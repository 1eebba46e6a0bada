// With no operator token configured (neither BURSAR_ADMIN_TOKEN nor a stored hash: a library
// embedding that never set one), every operator route answers 503 operator_not_configured, to
// any bearer token or none, and changes nothing.

import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OperatorTokens } from "../../src/datadir.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { buildServer } from "../../src/server/app.js";
import { operatorRoutes } from "../../src/server/routes/operator.js";

let bursar: Bursar;
let app: FastifyInstance;
let url: string;
beforeAll(async () => {
  bursar = await createBursar({ db: ":memory:" });
  const access = { operator: OperatorTokens.none(), ledger: bursar.ledger };
  app = await buildServer({ logger: false, plugins: [operatorRoutes(access, bursar.gate.gateContext)] });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});
afterAll(async () => {
  await app.close();
  await bursar.close();
});

describe("operator routes with no operator token configured", () => {
  it("answer 503 operator_not_configured, with or without a bearer token, and create nothing", async () => {
    for (const [method, path, body] of [
      ["POST", "/api/v1/agents", { name: "nobody" }],
      ["GET", "/api/v1/inbox", undefined],
      ["GET", "/api/v1/approvals", undefined],
      ["POST", "/api/v1/blocks", { agent_id: "agt_nobody", currency: "INR" }],
    ] as const) {
      for (const authorization of [undefined, "Bearer bsr_op_guessed0000000000000000"]) {
        const response = await fetch(`${url}${path}`, {
          method,
          headers: { ...(body ? { "content-type": "application/json" } : {}), ...(authorization ? { authorization } : {}) },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        expect({ path, status: response.status, body: await response.json() }).toEqual({
          path,
          status: 503,
          body: { error: { code: "operator_not_configured", message: "no operator token is configured (BURSAR_ADMIN_TOKEN or bursar admin rotate)" } },
        });
      }
    }
    const agents = await bursar.driver.read(async (tx) => (await tx.get<{ n: number }>("SELECT COUNT(*) AS n FROM agents"))?.n);
    expect(agents).toBe(0);
  });
});
