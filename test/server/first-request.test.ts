// A connection must bring its first request's head within first_request_timeout_ms. Node bounds
// a request only once its first byte has come, so a connection that never sent one stayed open
// for good: a few thousand of them, no credential needed, used up the file descriptors.

import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer, first_request_timeout_ms } from "../../src/server/app.js";
import { RawConnection } from "../support/raw-connection.js";

/** Short, so that the tests wait a fraction of a second rather than the 30 s default. */
const timeout_ms = 300;
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  app = await buildServer({ logger: false, first_request_timeout_ms: timeout_ms });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});
afterAll(async () => app.close());

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe("a connection's first request", () => {
  it("is 30 s away at most by default", () => {
    expect(first_request_timeout_ms).toBe(30_000);
  });

  it("closes a connection that sends nothing", async () => {
    const connection = await RawConnection.open(url);
    await Promise.race([connection.closed, sleep(10 * timeout_ms)]);
    expect(connection.is_closed).toBe(true);
  });

  it("closes a connection whose first request's head has not all come", async () => {
    const connection = await RawConnection.open(url);
    connection.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    await Promise.race([connection.closed, sleep(10 * timeout_ms)]);
    expect(connection.is_closed).toBe(true);
  });

  it("keeps a connection that brought its request in time, answered and idle past the timeout, for its next request", async () => {
    const connection = await RawConnection.open(url);
    connection.writeHead("GET /healthz HTTP/1.1");
    expect((await connection.response()).status).toBe(200);
    await sleep(3 * timeout_ms);
    expect(connection.is_closed).toBe(false);
    connection.writeHead("GET /healthz HTTP/1.1");
    expect((await connection.response()).status).toBe(200);
    connection.destroy();
  });
});
