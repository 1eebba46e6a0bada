// The request target is read as the router reads it, by every part of the server: a target in
// absolute form (`GET http://host/healthz`, which an HTTP/1.1 server must take) as its path, a
// percent-encoded letter of a route's path as the letter (a 405 names the methods the route
// takes), and a "#", where the router ends the path and code reading the text would read on,
// refused before any route runs. The access log keeps an observer URL's query values out however
// the target is written.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer, loggerOptions, originForm } from "../../src/server/app.js";
import { logLines } from "../support/log.js";
import { RawConnection } from "../support/raw-connection.js";

const log = logLines();
let url: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const app = await buildServer({ logger: { ...(loggerOptions("info") as object), stream: log.stream } });
  url = await app.listen({ host: "127.0.0.1", port: 0 });
  close = () => app.close();
});
afterAll(async () => close());

async function ask(head: string) {
  const connection = await RawConnection.open(url);
  try {
    connection.writeHead(head);
    const response = await connection.response();
    return { status: response.status, body: JSON.parse(response.body) as Record<string, unknown>, allow: response.headers.allow };
  } finally {
    connection.destroy();
  }
}

describe("originForm", () => {
  const cases: Array<[string, string]> = [
    ["/healthz", "/healthz"],
    ["http://example.test/healthz?x=1", "/healthz?x=1"],
    ["HTTPS://example.test:8443/observe/t/mcp", "/observe/t/mcp"],
    ["http://example.test", "/"],
    ["http://example.test?x=1", "/?x=1"],
    ["http://user@example.test/mcp", "/mcp"],
    ["*", "*"],
    ["ftp://example.test/healthz", "ftp://example.test/healthz"],
  ];
  for (const [target, path] of cases) it(`reads ${target} as ${path}`, () => expect(originForm(target)).toBe(path));
});

describe("a request target", () => {
  it("in absolute form is answered as its path is, a 405 naming that path", async () => {
    expect(await ask("GET http://example.test/healthz HTTP/1.1")).toMatchObject({ status: 200, body: { ok: true } });
    const refused = await ask("DELETE http://example.test/healthz HTTP/1.1");
    expect(refused).toMatchObject({ status: 405, allow: "GET, HEAD" });
    expect((refused.body.error as { message: string }).message).toBe("DELETE is not allowed on /healthz; it takes GET, HEAD");
  });

  it("with a percent-encoded letter in a route's path is that route's: 405, not 404, for another method", async () => {
    expect(await ask("GET /%68ealthz HTTP/1.1")).toMatchObject({ status: 200 });
    for (const path of ["/%68ealthz", "/%68%65alth%7A", "/healt%68%7a"]) {
      const refused = await ask(`DELETE ${path} HTTP/1.1`);
      expect(refused.status, path).toBe(405);
    }
    // An escape of a delimiter is not read as one: no route's path holds "/healthz%2F".
    expect((await ask("DELETE /healthz%2F HTTP/1.1")).status).toBe(404);
  });

  it("holding a '#' is refused 400, on every route and on none, before anything runs", async () => {
    for (const target of ["/healthz#x", "/observe#?api_key=x", "/mcp#", "/nowhere#x", "http://example.test/healthz#x"]) {
      const refused = await ask(`GET ${target} HTTP/1.1`);
      expect(refused.status, target).toBe(400);
      expect(refused.body, target).toMatchObject({ error: { code: "malformed", message: expect.stringContaining('holds a "#"') } });
    }
  });

  it("to the observer keeps its query values out of the access log, in absolute form and with a '#' too", async () => {
    const secrets = ["canary-absolute-0123456789", "canary-fragment-0123456789", "canary-encoded-0123456789"];
    await ask(`POST http://example.test/observe?api_key=${secrets[0]} HTTP/1.1`);
    await ask(`POST /observe#?api_key=${secrets[1]} HTTP/1.1`);
    await ask(`POST /obs%65rve#/mcp?api_key=${secrets[2]} HTTP/1.1`);
    expect(log.text()).toContain("api_key=[redacted]");
    for (const secret of secrets) expect(log.text()).not.toContain(secret);
  });
});
