// A client may half-close its connection (send its FIN) once its request is whole, as socat and
// some proxies do: it still gets the whole answer, and the connection is closed after it.

import { connect, type Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer, half_closed_timeout_ms } from "../../src/server/app.js";
import { testServer, type TestServer } from "../support/server.js";

/** Every wait here ends by then, so a connection left open fails the test rather than hanging it. */
const wait_ms = 5_000;

interface HalfClosed {
  /** Everything the server sent before it closed its side. */
  received: string;
  /** Whether the server closed its side (FIN) within wait_ms. */
  server_closed: boolean;
  /** The client's port, which names the connection at the server (read before the socket closes). */
  port: number;
}

/** Sends `request` whole on a new connection, half-closes it, reads until the server closes its side (or `wait`), then lets the socket go. */
async function sendThenHalfClose(url: string, request: string, wait = wait_ms): Promise<HalfClosed> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.on("error", () => undefined);
  const local_port = socket.localPort ?? 0;
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
  const ended = new Promise<boolean>((resolve) => {
    socket.once("end", () => resolve(true));
    socket.once("close", () => resolve(true));
    setTimeout(() => resolve(false), wait).unref();
  });
  socket.end(request);
  const server_closed = await ended;
  socket.destroy();
  return { received, server_closed, port: local_port };
}

/**
 * The server's end of each connection, by the client's port, as it is accepted. Whether the
 * server's end has closed is what tells a leak: the client's own close proves nothing of it.
 */
function serverEnds(app: FastifyInstance): Map<number, Socket> {
  const ends = new Map<number, Socket>();
  app.server.on("connection", (socket: Socket) => ends.set(socket.remotePort ?? 0, socket));
  return ends;
}

/** Whether the server's end of the connection from `client_port` closes within wait_ms. */
async function serverEndCloses(ends: Map<number, Socket>, client_port: number): Promise<boolean> {
  const end = ends.get(client_port);
  if (!end) throw new Error("the server never saw the connection");
  if (end.destroyed) return true;
  return new Promise<boolean>((resolve) => {
    end.once("close", () => resolve(true));
    setTimeout(() => resolve(end.destroyed), wait_ms).unref();
  });
}

function post(path: string, body: string, headers: Record<string, string>): string {
  const lines = Object.entries({ host: "127.0.0.1", "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers }).map(
    ([name, value]) => `${name}: ${value}`,
  );
  return `POST ${path} HTTP/1.1\r\n${lines.join("\r\n")}\r\n\r\n${body}`;
}

describe("a POST /mcp whose client half-closes the connection after sending it", () => {
  let server: TestServer;
  let ends: Map<number, Socket>;
  beforeAll(async () => {
    server = await testServer();
    ends = serverEnds(server.started.app);
  });
  afterAll(async () => server.close());

  it("gets the whole answer (the order it made), and the server closes the connection after it", async () => {
    const agent = await server.agent("half-closer");
    const call = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "create_order", arguments: { amount: 4_000, currency: "INR", idempotency_key: "half-close-1" } } };
    const request = post("/mcp", JSON.stringify(call), { authorization: `Bearer ${agent.token}`, accept: "application/json, text/event-stream" });
    const { received, server_closed, port } = await sendThenHalfClose(server.url, request);
    // It received 0 bytes: Node ended the connection on the client's FIN before the answer.
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    const answer = JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)) as { id: number; result: { structuredContent: { effect: string; order?: { id: string } } } };
    expect(answer.id).toBe(1);
    expect(answer.result.structuredContent.effect).toBe("ALLOW");
    expect((await server.started.bursar.ledger.getBlock(agent.block_id)).held).toBe(4_000);
    expect(server_closed).toBe(true);
    expect(await serverEndCloses(ends, port)).toBe(true);
  });
});

describe("a half-closed connection whose answer does not come", () => {
  /** Well past every wait here: a connection closed within wait_ms was not closed by it. */
  const long_timeout_ms = 60_000;
  let apps: Array<{ app: FastifyInstance; ends: Map<number, Socket> }> = [];
  /** A server whose answers never end (as an observer's relayed SSE stream from a quiet upstream),
   *  on /mcp, whose answer a half-closed connection waits for, and elsewhere. */
  async function hangingServer(timeout_ms: number): Promise<{ url: string; ends: Map<number, Socket> }> {
    const never = (_request: FastifyRequest, reply: FastifyReply) => {
      reply.hijack();
      reply.raw.writeHead(200, { "content-type": "text/event-stream" });
      reply.raw.write(": open\n\n");
    };
    const hanging = (instance: FastifyInstance) => {
      instance.post("/mcp", async (request, reply) => never(request, reply));
      instance.post("/elsewhere", async (request, reply) => never(request, reply));
    };
    const app = await buildServer({ logger: false, half_closed_timeout_ms: timeout_ms, plugins: [hanging] });
    const ends = serverEnds(app);
    apps.push({ app, ends });
    return { url: await app.listen({ host: "127.0.0.1", port: 0 }), ends };
  }
  afterAll(async () => {
    // The connection held for long_timeout_ms would hold close() as long.
    for (const { ends } of apps) for (const end of ends.values()) end.destroy();
    await Promise.all(apps.map(({ app }) => app.close()));
    apps = [];
  });

  it("is held open on /mcp after the client's FIN, and closed once half_closed_timeout_ms pass (5 minutes by default), not held for good", async () => {
    expect(half_closed_timeout_ms).toBe(300_000);
    const held = await hangingServer(long_timeout_ms);
    const waiting = await sendThenHalfClose(held.url, post("/mcp", "{}", {}), 1_000);
    expect(waiting.received).toMatch(/^HTTP\/1\.1 200 /);
    expect(waiting.server_closed).toBe(false);
    const bounded = await hangingServer(300);
    const { received, server_closed, port } = await sendThenHalfClose(bounded.url, post("/mcp", "{}", {}));
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(server_closed).toBe(true);
    expect(await serverEndCloses(bounded.ends, port)).toBe(true);
  });

  it("is closed at once on the client's FIN on any other route, whatever half_closed_timeout_ms says: there the FIN says the client left", async () => {
    const { url, ends } = await hangingServer(long_timeout_ms);
    const { server_closed, port } = await sendThenHalfClose(url, post("/elsewhere", "{}", {}));
    expect(server_closed).toBe(true);
    expect(await serverEndCloses(ends, port)).toBe(true);
  });
});
