// One agent's requests in flight on /mcp are bounded per instance: each holds its body in memory
// while it is read and decided. Past the bound a request is answered 429 before its body is read;
// another agent is not affected, a request that ends frees its place, and one whose client left
// during its authentication is never counted (its place would otherwise be lost for good).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventEmitter } from "node:events";
import type { FastifyReply } from "fastify";
import { agent_requests_in_flight_max, RequestsInFlight } from "../../src/server/mcp.js";
import { RawConnection } from "../support/raw-connection.js";
import { testServer, type TestServer } from "../support/server.js";
import { waitUntil } from "../support/wait.js";

let server: TestServer;
beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const tools_list = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });

/** A POST /mcp whose head is sent and whose body is not: it stays in flight until closed. */
async function stalled(token: string, content_length = 1000): Promise<RawConnection> {
  const connection = await RawConnection.open(server.url);
  connection.writeHead(
    `POST /mcp HTTP/1.1\ncontent-type: application/json\naccept: application/json, text/event-stream\nauthorization: Bearer ${token}\ncontent-length: ${content_length}`,
  );
  return connection;
}

async function listTools(token: string): Promise<{ status: number; body: string; retry_after: string | null }> {
  const response = await fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${token}` },
    body: tools_list,
  });
  return { status: response.status, body: await response.text(), retry_after: response.headers.get("retry-after") };
}

/** Calls that wait at a gate the test opens (release), counted as they arrive; then they run as ever. */
function heldBack() {
  let release = () => undefined as void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  const held = {
    waiting: 0,
    release: () => release(),
    async pass<T>(call: () => Promise<T>): Promise<T> {
      held.waiting += 1;
      await opened;
      return call();
    },
  };
  return held;
}

/** Resets every connection, and returns once the server has seen them all close. */
async function resetAll(connections: readonly RawConnection[]): Promise<void> {
  const open = () => new Promise<number>((resolve, reject) => server.started.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
  const before = await open();
  for (const connection of connections) connection.socket.resetAndDestroy();
  await waitUntil("the server to see the resets", async () => (await open()) <= before - connections.length);
}

/** A reply as RequestsInFlight sees it: its raw response's close, and whether it is destroyed. */
function fakeReply(destroyed: boolean): { reply: FastifyReply; close(): void } {
  const raw = Object.assign(new EventEmitter(), { destroyed });
  return { reply: { raw } as unknown as FastifyReply, close: () => raw.emit("close") };
}

describe("requests in flight per agent on /mcp", () => {
  it("does not count a request whose client left while it was being authenticated (its close has fired already)", () => {
    const in_flight = new RequestsInFlight();
    for (let i = 0; i < 2 * agent_requests_in_flight_max; i++) expect(in_flight.take("agt_left", fakeReply(true).reply)).toBe(true);
    const live = Array.from({ length: agent_requests_in_flight_max }, () => fakeReply(false));
    for (const { reply } of live) expect(in_flight.take("agt_left", reply)).toBe(true);
    expect(in_flight.take("agt_left", fakeReply(false).reply)).toBe(false);
    live[0]!.close();
    expect(in_flight.take("agt_left", fakeReply(false).reply)).toBe(true);
  });

  it("keeps counting a request whose client left while the gate's work on it goes on, until that work ends", async () => {
    const in_flight = new RequestsInFlight();
    const live = Array.from({ length: agent_requests_in_flight_max }, () => fakeReply(false));
    let finish = () => undefined as void;
    const work = new Promise<void>((resolve) => (finish = resolve));
    for (const { reply } of live) expect(in_flight.take("agt_gone", reply)).toBe(true);
    in_flight.busyUntil(live[0]!.reply, work);
    live[0]!.close();
    expect(in_flight.take("agt_gone", fakeReply(false).reply)).toBe(false);
    finish();
    await work;
    await Promise.resolve();
    expect(in_flight.take("agt_gone", fakeReply(false).reply)).toBe(true);
  });

  it("counts a request once while its answer or the work on it lasts: a client gone before the work began is counted again, never twice", async () => {
    const in_flight = new RequestsInFlight();
    const live = Array.from({ length: agent_requests_in_flight_max }, () => fakeReply(false));
    for (const { reply } of live) expect(in_flight.take("agt_early", reply)).toBe(true);
    const works = live.slice(0, 10).map(({ reply, close }) => {
      close();
      let finish = () => undefined as void;
      const work = new Promise<void>((resolve) => (finish = resolve));
      in_flight.busyUntil(reply, work);
      return { work, finish };
    });
    expect(in_flight.take("agt_early", fakeReply(false).reply)).toBe(false);
    for (const { finish } of works) finish();
    await Promise.all(works.map(({ work }) => work));
    await Promise.resolve();
    for (let i = 0; i < works.length; i++) expect(in_flight.take("agt_early", fakeReply(false).reply)).toBe(true);
    expect(in_flight.take("agt_early", fakeReply(false).reply)).toBe(false);
  });

  it("counts a request whose client resets while the handler authenticates its agent again", async () => {
    const agent = await server.agent("in-flight-second-auth");
    const ledger = server.started.bursar.ledger;
    const authenticate = ledger.authenticateAgent.bind(ledger);
    const held = heldBack();
    let holding = false;
    ledger.authenticateAgent = async (token) => (holding ? held.pass(() => authenticate(token)) : authenticate(token));
    const connections: RawConnection[] = [];
    try {
      for (let i = 0; i < agent_requests_in_flight_max; i++) connections.push(await stalled(agent.token, tools_list.length));
      await waitUntil("every request to be counted", async () => (await listTools(agent.token)).status === 429, { interval_ms: 20 });
      // Each body arrives and its handler authenticates the agent again, held back; then its client resets.
      holding = true;
      for (const connection of connections) connection.write(tools_list);
      await waitUntil("every handler to authenticate again", () => held.waiting === agent_requests_in_flight_max);
      holding = false;
      await resetAll(connections);
      expect((await listTools(agent.token)).status).toBe(429);
      held.release();
      await waitUntil("the handlers to end", async () => (await listTools(agent.token)).status === 200, { interval_ms: 50 });
    } finally {
      held.release();
      ledger.authenticateAgent = authenticate;
      for (const connection of connections) connection.destroy();
    }
  });

  it("counts money calls whose clients reset their connections until the gate has finished them", async () => {
    const agent = await server.agent("in-flight-reset");
    const provider = server.started.bursar.gate.gateContext.provider;
    const createOrder = provider.createOrder.bind(provider);
    const held = heldBack();
    provider.createOrder = (input) => held.pass(() => createOrder(input));
    const connections: RawConnection[] = [];
    try {
      for (let i = 0; i < agent_requests_in_flight_max; i++) {
        const body = JSON.stringify({ jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "create_order", arguments: { amount: 100, currency: "INR", idempotency_key: `reset-${i}` } } });
        const connection = await RawConnection.open(server.url);
        connection.writeHead(
          `POST /mcp HTTP/1.1\ncontent-type: application/json\naccept: application/json, text/event-stream\nauthorization: Bearer ${agent.token}\ncontent-length: ${Buffer.byteLength(body)}`,
        );
        connection.write(body);
        connections.push(connection);
      }
      // Every call is held and on its way to the provider, held back: then each client resets.
      await waitUntil("every call to reach the provider", () => held.waiting === agent_requests_in_flight_max);
      await resetAll(connections);
      expect((await listTools(agent.token)).status).toBe(429);
      held.release();
      await waitUntil("the gate to finish the calls", async () => (await listTools(agent.token)).status === 200, { interval_ms: 50 });
      expect((await server.api<{ held: number }>("GET", `/api/v1/blocks/${agent.block_id}`)).body.held).toBe(100 * agent_requests_in_flight_max);
    } finally {
      held.release();
      provider.createOrder = createOrder;
      for (const connection of connections) connection.destroy();
    }
  });

  it(`answers 429 past ${agent_requests_in_flight_max} of one agent's requests in flight, and frees a place when one ends`, async () => {
    const busy = await server.agent("in-flight-busy");
    const other = await server.agent("in-flight-other");
    const connections: RawConnection[] = [];
    try {
      for (let i = 0; i < agent_requests_in_flight_max; i++) connections.push(await stalled(busy.token));
      // Each stalled request is counted once its head is authenticated.
      await waitUntil("every stalled request to be counted", async () => (await listTools(busy.token)).status === 429, { interval_ms: 20 });
      const refused = await listTools(busy.token);
      expect(refused.status).toBe(429);
      expect(refused.retry_after).toBe("1");
      expect(JSON.parse(refused.body)).toEqual({
        error: {
          code: "too_many_requests_in_flight",
          message: `this agent already has ${agent_requests_in_flight_max} requests in flight on this instance; send more once some are answered (nothing was read or decided)`,
        },
      });
      expect((await listTools(other.token)).status).toBe(200);
      connections.pop()!.socket.destroy();
      await waitUntil("a place to be freed", async () => (await listTools(busy.token)).status === 200, { interval_ms: 20 });
    } finally {
      for (const connection of connections) connection.socket.destroy();
    }
    await waitUntil("every place to be freed", async () => (await listTools(busy.token)).status === 200, { interval_ms: 20 });
  });
});
