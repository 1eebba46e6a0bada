// A real `bursar serve` shutting down with observed calls in flight: each is written to the log,
// as no_response "shutdown", before the database closes, never lost without an entry or a gap.

import { rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveSigningKey } from "../../src/evidence/index.js";
import { createBursar } from "../../src/index.js";
import { waitFor } from "../provider/support.js";
import { testServer } from "../support/server.js";
import { listenLoopback, toolCall, type ObserverSourceCreated } from "./support.js";

let upstream: Server;
let upstream_url: string;
/** Requests the upstream read whole, and holds unanswered for ever. */
const held: Array<{ request: IncomingMessage; response: ServerResponse }> = [];

beforeAll(async () => {
  upstream = createServer((request, response) => {
    request.resume();
    request.on("end", () => held.push({ request, response }));
  });
  upstream_url = `${await listenLoopback(upstream)}/mcp`;
});
afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

describe("shutting down with observed calls in flight", () => {
  it("writes each call the upstream never answered before the database closes", async () => {
    const server = await testServer();
    try {
      const created = await server.api<ObserverSourceCreated>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "their-mcp", upstream_url });
      expect(created.status).toBe(201);
      const { observer_url, observer_token } = created.body;
      const headers = { accept: "application/json, text/event-stream", "content-type": "application/json", "x-bursar-observer-token": observer_token };
      const calls = [toolCall(1, "transfer_funds", { amount: 100 }), [toolCall(2, "refund", { amount: 5 }), toolCall(3, "echo", {})]];
      const answers = calls.map((body) => fetch(observer_url, { method: "POST", headers, body: JSON.stringify(body) }).then((answer) => answer.status, () => "cut"));
      await waitFor(() => held.length === calls.length, 5_000, "the upstream to hold every request");

      await server.started.app.close();
      expect(await Promise.all(answers)).toEqual(["cut", "cut"]);

      const signingKey = resolveSigningKey({ dataDir: server.dir, create: false }).privateKey;
      const reopened = await createBursar({ db: join(server.dir, "bursar.db"), signingKey });
      try {
        const entries = await reopened.log.entries(0, await reopened.log.treeSize());
        const observed = entries.filter((stored) => stored.entry.kind === "observer.call").map((stored) => stored.entry.body as Record<string, unknown>);
        expect(observed.map((body) => [body.tool, body.outcome]).sort()).toEqual([
          ["echo", { type: "no_response", reason: "shutdown" }],
          ["refund", { type: "no_response", reason: "shutdown" }],
          ["transfer_funds", { type: "no_response", reason: "shutdown" }],
        ]);
        expect(entries.filter((stored) => stored.entry.kind === "system.evidence_gap")).toEqual([]);
      } finally {
        await reopened.close();
      }
    } finally {
      rmSync(server.dir, { recursive: true, force: true });
    }
  }, 20_000);
});
