// A response sent before its request's body was read (a 404, a 401 from an auth hook, a GET route
// given a body) closes the connection when the unread body is chunked or declared over the
// route's limit: Node would otherwise discard it after the answer for as long as the client kept
// sending. A body declared within the limit keeps the connection (discarding it is bounded), and
// so does an ordinary request with a body that is read.

import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { body_limit_default_bytes, buildServer, pipelined_answers_open_max, request_timeout_ms } from "../../src/server/app.js";
import { RawConnection, type RawResponse } from "../support/raw-connection.js";
import { operator_token, testServer, type TestServer } from "../support/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await testServer();
});
afterAll(async () => server.close());

const chunk_bytes = 64 * 1024;


const filler = Buffer.alloc(chunk_bytes, "x");
/** One chunk of a chunked body that never ends. */
const chunked_filler = Buffer.concat([Buffer.from(`${chunk_bytes.toString(16)}\r\n`), filler, Buffer.from("\r\n")]);
/** What the measured defect sent: about 100 GB declared, so Node would discard for minutes at ~1 GB/s. */
const huge_length = "100000000000";

describe("a response sent before the body is read closes a connection whose body is unbounded", () => {
  const cases = [
    { name: "an unknown route (404), declared 100 GB", head: `GET /nope HTTP/1.1\ncontent-length: ${huge_length}`, status: 404, chunk: filler },
    { name: "an unknown route (404), chunked", head: "GET /nope HTTP/1.1\ntransfer-encoding: chunked", status: 404, chunk: chunked_filler },
    { name: "a GET route given a body (/healthz), declared 100 GB", head: `GET /healthz HTTP/1.1\ncontent-length: ${huge_length}`, status: 200, chunk: filler },
    {
      name: "an operator route without a token (401 from its onRequest hook), chunked",
      head: "POST /api/v1/agents HTTP/1.1\ncontent-type: application/json\ntransfer-encoding: chunked",
      status: 401,
      chunk: chunked_filler,
    },
    {
      name: "an operator route with an agent-shaped bad token (401), declared 100 GB",
      head: `POST /api/v1/agents HTTP/1.1\ncontent-type: application/json\nauthorization: Bearer bsr_agent_forged\ncontent-length: ${huge_length}`,
      status: 401,
      chunk: filler,
    },
    { name: "the observer without a token (401 before its relay), chunked", head: "POST /observe HTTP/1.1\ncontent-type: application/json\ntransfer-encoding: chunked", status: 401, chunk: chunked_filler },
    { name: "GET /mcp (405), declared 100 GB", head: `GET /mcp HTTP/1.1\ncontent-length: ${huge_length}`, status: 405, chunk: filler },
    { name: "POST /mcp without a token (401 before its body is read), chunked", head: "POST /mcp HTTP/1.1\ncontent-type: application/json\ntransfer-encoding: chunked", status: 401, chunk: chunked_filler },
    { name: "POST /mcp without a token, declared one byte over the limit", head: `POST /mcp HTTP/1.1\ncontent-type: application/json\ncontent-length: ${body_limit_default_bytes + 1}`, status: 401, chunk: filler },
    // Node kept 2,000 header lines and dropped the rest unseen, yet framed the body by them.
    {
      name: "POST /mcp without a token, declared 100 GB after 2,500 other header lines",
      head: `POST /mcp HTTP/1.1\ncontent-type: application/json\n${"a:\n".repeat(2_500)}content-length: ${huge_length}`,
      status: 401,
      chunk: filler,
    },
    { name: "an unknown route (404), chunked after 2,500 other header lines", head: `GET /nope HTTP/1.1\n${"a:\n".repeat(2_500)}transfer-encoding: chunked`, status: 404, chunk: chunked_filler },
    { name: "an unknown Expect (417, Node's own answer otherwise), chunked", head: "GET /nope HTTP/1.1\nexpect: foo\ntransfer-encoding: chunked", status: 417, chunk: chunked_filler },
    // Answered by Fastify before routing, past its hooks: the connection is closed without saying so.
    { name: "a URL Fastify cannot decode (400), chunked", head: "GET /healthz%zz HTTP/1.1\ntransfer-encoding: chunked", status: 400, chunk: chunked_filler, says_close: false },
    { name: "a path parameter over Fastify's length (414), chunked", head: `POST /ingest/${"s".repeat(150)} HTTP/1.1\ntransfer-encoding: chunked`, status: 414, chunk: chunked_filler, says_close: false },
  ];

  it("answers what the router or Node's parser refuses in Bursar's error shape, without echoing the path", async () => {
    const token = "bsr_obs_secretsecretsecretsecret";
    for (const [head, status, code] of [
      [`GET /observe/${token}/%FF HTTP/1.1`, 400, "malformed"],
      [`POST /ingest/${"s".repeat(150)} HTTP/1.1\ncontent-length: 0`, 414, "uri_too_long"],
      [`GET /healthz HTTP/1.1\nx-big: ${"h".repeat(20_000)}`, 431, "headers_too_large"],
    ] as const) {
      const connection = await RawConnection.open(server.url);
      try {
        connection.writeHead(head);
        const answer = await connection.response();
        expect(answer.status, head.slice(0, 40)).toBe(status);
        expect(JSON.parse(answer.body)).toEqual({ error: { code, message: expect.any(String) } });
        expect(answer.body).not.toContain(token);
      } finally {
        connection.destroy();
      }
    }
  });

  for (const { name, head, status, chunk, says_close = true } of cases) {
    it(`${name}: answers ${status}${says_close ? " with Connection: close" : ""}, then closes while the client is still sending`, async () => {
      const connection = await RawConnection.open(server.url);
      try {
        connection.writeHead(head);
        connection.write(chunk);
        const answer = await connection.response();
        expect(answer.status).toBe(status);
        if (says_close) expect(answer.headers.connection).toBe("close");
        const sent_at_answer = connection.sent_bytes;
        expect(await connection.sendUntilClosed(chunk)).toBe(true);
        // Bounded by what was in flight when the server closed, not by what the client was willing to send.
        expect(connection.sent_bytes - sent_at_answer).toBeLessThan(256 * 1024 * 1024);
      } finally {
        connection.destroy();
      }
    }, 15_000);
  }

  it("closes a 404 whose body is declared one byte over the limit, and keeps one declared exactly at the limit", async () => {
    const over = await RawConnection.open(server.url);
    try {
      over.writeHead(`GET /nope HTTP/1.1\ncontent-length: ${body_limit_default_bytes + 1}`);
      const answer = await over.response();
      expect({ status: answer.status, connection: answer.headers.connection }).toEqual({ status: 404, connection: "close" });
      await expect(over.sendUntilClosed(filler)).resolves.toBe(true);
    } finally {
      over.destroy();
    }
    const at_limit = await RawConnection.open(server.url);
    try {
      at_limit.writeHead(`GET /nope HTTP/1.1\ncontent-length: ${body_limit_default_bytes}`);
      const answer = await at_limit.response();
      expect({ status: answer.status, connection: answer.headers.connection }).toEqual({ status: 404, connection: "keep-alive" });
      // The rest of the declared body, then a second request: Node discarded the body and reads the request.
      at_limit.write(Buffer.alloc(body_limit_default_bytes, "x"));
      at_limit.writeHead("GET /healthz HTTP/1.1");
      const next = await at_limit.response();
      expect({ status: next.status, body: JSON.parse(next.body) as unknown, closed: at_limit.is_closed }).toEqual({ status: 200, body: { ok: true }, closed: false });
    } finally {
      at_limit.destroy();
    }
  }, 15_000);
});

describe("requests pipelined ahead of their answers", () => {
  const healthz = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

  it(`are all answered, ${pipelined_answers_open_max} in one write, on a connection kept open`, async () => {
    const connection = await RawConnection.open(server.url);
    try {
      connection.write(healthz.repeat(pipelined_answers_open_max));
      for (let answered = 0; answered < pipelined_answers_open_max; answered++) expect((await connection.response()).status).toBe(200);
      expect(connection.is_closed).toBe(false);
    } finally {
      connection.destroy();
    }
  });

  it(`run none of the requests read past the cap: of ${10 * pipelined_answers_open_max} sent in one write, at most ${pipelined_answers_open_max} reach their route`, async () => {
    let ran = 0;
    const counting = await buildServer({
      logger: false,
      plugins: [
        (app) => {
          app.get("/count", async () => ({ ran: ++ran }));
        },
      ],
    });
    const url = await counting.listen({ host: "127.0.0.1", port: 0 });
    const connection = await RawConnection.open(url);
    try {
      connection.write("GET /count HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".repeat(10 * pipelined_answers_open_max));
      await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      expect(connection.is_closed).toBe(true);
      // What Node parsed of the closed connection's bytes was routed meanwhile, or never will be.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(ran).toBeGreaterThan(0);
      expect(ran).toBeLessThanOrEqual(pipelined_answers_open_max);
    } finally {
      connection.destroy();
      await counting.close();
    }
  });

  it(`close the connection once more than ${pipelined_answers_open_max} are unanswered (Node answered 100,000 sent in one write)`, async () => {
    const connection = await RawConnection.open(server.url);
    try {
      connection.write(healthz.repeat(10 * pipelined_answers_open_max));
      await Promise.race([connection.closed, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      expect(connection.is_closed).toBe(true);
      let answered = 0;
      while (await connection.response(0).then(() => true, () => false)) answered++;
      expect(answered).toBeLessThanOrEqual(pipelined_answers_open_max);
    } finally {
      connection.destroy();
    }
  });
});

describe("connections that stay open", () => {
  it("keeps the connection after a 404 to a small declared body sent in part, and answers the next request on it", async () => {
    const connection = await RawConnection.open(server.url);
    try {
      connection.writeHead("GET /nope HTTP/1.1\ncontent-length: 10");
      connection.write('{"a":');
      const refused = await connection.response();
      expect({ status: refused.status, connection: refused.headers.connection }).toEqual({ status: 404, connection: "keep-alive" });
      connection.write('"bc"}');
      connection.writeHead("GET /healthz HTTP/1.1");
      const next = await connection.response();
      expect({ status: next.status, body: JSON.parse(next.body) as unknown, connection: next.headers.connection }).toEqual({
        status: 200,
        body: { ok: true },
        connection: "keep-alive",
      });
      expect(connection.is_closed).toBe(false);
    } finally {
      connection.destroy();
    }
  });

  it("keeps the connection for authenticated POSTs with bodies, by Content-Length and chunked alike", async () => {
    const connection = await RawConnection.open(server.url);
    try {
      const body = JSON.stringify({ name: "unread-body-keepalive" });
      connection.writeHead(`POST /api/v1/agents HTTP/1.1\ncontent-type: application/json\nauthorization: Bearer ${operator_token}\ncontent-length: ${Buffer.byteLength(body)}`);
      connection.write(body);
      const first = await connection.response();
      expect({ status: first.status, connection: first.headers.connection }).toEqual({ status: 201, connection: "keep-alive" });
      expect(JSON.parse(first.body)).toMatchObject({ name: "unread-body-keepalive", agent_id: expect.any(String) });
      const second_body = JSON.stringify({ name: "unread-body-chunked" });
      connection.writeHead(`POST /api/v1/agents HTTP/1.1\ncontent-type: application/json\nauthorization: Bearer ${operator_token}\ntransfer-encoding: chunked`);
      connection.write(`${Buffer.byteLength(second_body).toString(16)}\r\n${second_body}\r\n0\r\n\r\n`);
      const second = await connection.response();
      expect({ status: second.status, connection: second.headers.connection }).toEqual({ status: 201, connection: "keep-alive" });
      expect(JSON.parse(second.body)).toMatchObject({ name: "unread-body-chunked" });
      expect(connection.is_closed).toBe(false);
    } finally {
      connection.destroy();
    }
  });

});

/**
 * Opens a connection, lets `send` write on it, then does to the request still arriving what Node's
 * periodic check does once the request timeout has passed; answers what the client reads after:
 * an answer (the 408), or "closed" when the connection closes without one.
 */
async function cutAfter(send: (connection: RawConnection) => Promise<void>): Promise<RawResponse | "closed"> {
  const accepted = new Promise<Socket>((resolve) => server.started.app.server.once("connection", resolve));
  const connection = await RawConnection.open(server.url);
  try {
    const server_socket = await accepted;
    await send(connection);
    // Everything written has reached the server (its parser reads as bytes arrive) before the cut.
    const deadline = Date.now() + 10_000;
    while (server_socket.bytesRead < connection.sent_bytes) {
      if (Date.now() > deadline) throw new Error(`the server read ${server_socket.bytesRead} of ${connection.sent_bytes} bytes written`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const timeout = Object.assign(new Error("Request timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" });
    server.started.app.server.emit("clientError", timeout, server_socket);
    const answer = await connection.response().catch((error: Error) => {
      if (/closed before a response/.test(error.message)) return "closed" as const;
      throw error;
    });
    await connection.closed;
    return answer;
  } finally {
    connection.destroy();
  }
}

describe("a request still arriving when the request timeout cuts it", () => {
  it("is bounded: the server sets Node's request timeout, which Fastify leaves off by default", () => {
    expect(request_timeout_ms).toBeGreaterThan(0);
    expect(server.started.app.server.requestTimeout).toBe(request_timeout_ms);
  });

  it("gets a 408 and a closed connection when nothing answered it, after an earlier request on the connection was answered", async () => {
    const cut = await cutAfter(async (connection) => {
      connection.writeHead("GET /healthz HTTP/1.1");
      expect((await connection.response()).status).toBe(200);
      // Headers that never end.
      connection.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    });
    expect(cut).toMatchObject({ status: 408 });
    expect(JSON.parse((cut as RawResponse).body)).toEqual({ error: { code: "request_timeout", message: "the request did not arrive in time" } });
  });

  it("gets a 408 when its body is still trickling in to a route that reads it and nothing has answered it yet", async () => {
    const cut = await cutAfter(async (connection) => {
      connection.writeHead(`POST /api/v1/agents HTTP/1.1\ncontent-type: application/json\nauthorization: Bearer ${operator_token}\ncontent-length: 100`);
      connection.write('{"name":');
    });
    expect(cut).toMatchObject({ status: 408 });
  });

  it("gets no stray 408 after an answer Fastify's hooks never saw (a 400 to an undecodable URL, its body still trickling in)", async () => {
    const cut = await cutAfter(async (connection) => {
      connection.writeHead("GET /healthz HTTP/1.1");
      expect((await connection.response()).status).toBe(200);
      connection.writeHead("GET /healthz%zz HTTP/1.1\ncontent-length: 10");
      connection.write("12345");
      expect((await connection.response()).status).toBe(400);
    });
    expect(cut).toBe("closed");
  });

  it("gets no 408 while an earlier pipelined request is still unanswered (it would be read as that request's answer)", async () => {
    const agent = await server.agent("unread-body-pipelined");
    server.started.simulator!.faults.set({ latency_ms: 1_000 });
    try {
      const call = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "create_order", arguments: { amount: 1_000, currency: "INR" } } });
      const cut = await cutAfter(async (connection) => {
        connection.writeHead(
          `POST /mcp HTTP/1.1\ncontent-type: application/json\naccept: application/json, text/event-stream\nauthorization: Bearer ${agent.token}\ncontent-length: ${Buffer.byteLength(call)}`,
        );
        // The money call, then a pipelined request whose headers never end, cut while the call waits on the provider.
        connection.write(`${call}GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n`);
      });
      // No 408; the call goes on (it is decided and held whatever the client saw).
      expect(cut).toBe("closed");
    } finally {
      server.started.simulator!.faults.reset();
    }
  });

  it("gets no stray 408 after its answer was sent (a 404 to a body still trickling in): the connection just closes", async () => {
    const cut = await cutAfter(async (connection) => {
      connection.writeHead("GET /nope HTTP/1.1\ncontent-length: 10");
      connection.write("12345");
      const refused = await connection.response();
      expect({ status: refused.status, connection: refused.headers.connection }).toEqual({ status: 404, connection: "keep-alive" });
    });
    expect(cut).toBe("closed");
  });
});
