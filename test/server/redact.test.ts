// Access logs never carry an observer token from the path, however the path is spelled: the
// token segment after /observe is redacted whatever the case, repeated or encoded slashes, and
// Bursar's own token shapes are redacted wherever they appear in the URL. An observer URL's
// query, which the upstream gets, is logged with its values redacted.

import { connect, type AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { buildServer, loggerOptions, redactUrl } from "../../src/server/app.js";
import { logLines } from "../support/log.js";

const token = "bsr_obs_Qm9ndXMtdG9rZW4tZm9yLXRoZS1yZWRhY3Rpb24tdGVzdA";

describe("redactUrl", () => {
  const cases: Array<[string, string]> = [
    [`/observe/${token}`, "/observe/[redacted]"],
    [`/observe/${token}/mcp?x=1`, "/observe/[redacted]/mcp?x=[redacted]"],
    // An observer URL's query is the upstream's: its values (and a part without "=") are redacted.
    ["/observe?api_key=QSECRET&access_token=QTOK&&flag", "/observe?api_key=[redacted]&access_token=[redacted]&&[redacted]"],
    ["/OBSERVE/x/mcp?q=sk_live_abcdefghijklmnop1234", "/OBSERVE/[redacted]/mcp?q=[redacted]"],
    ["/%6Fbserve?key=QSECRET", "/%6Fbserve?key=[redacted]"],
    // The router ends the observe segment at a "#" too (the request is refused, after it is logged).
    ["/observe#?api_key=QSECRET", "/observe#?api_key=[redacted]"],
    ["/obs%65rve#/mcp?api_key=QSECRET", "/obs%65rve#/mcp?api_key=[redacted]"],
    ["/observer?x=1", "/observer?x=1"],
    [`/Observe/${token}`, "/Observe/[redacted]"],
    [`/OBSERVE/${token}/mcp`, "/OBSERVE/[redacted]/mcp"],
    [`//observe/${token}`, "//observe/[redacted]"],
    [`/observe//${token}`, "/observe//[redacted]"],
    [`/observe%2F${token}`, "/observe%2F[redacted]"],
    ["/observe/not-a-token-shape", "/observe/[redacted]"],
    [`/%6Fbserve/${token}`, "/%6Fbserve/[redacted]"],
    [`/api/v1/log/entries?start=0&t=${token}`, "/api/v1/log/entries?start=0&t=[redacted]"],
    [`/mcp?x=_${token}`, "/mcp?x=_[redacted]"],
    [`/mcp?x=9${token}`, "/mcp?x=9[redacted]"],
    ["/api/v1/log/entries?start=0", "/api/v1/log/entries?start=0"],
    ["/observe", "/observe"],
    ["/observer/x", "/observer/x"],
    // The token rule finds a token glued to an encoded slash ("%2Fbsr_…") itself.
    [`/%6Fbserve%2F${token}`, "/%6Fbserve%2F[redacted]"],
    [`/observe%252F${token}`, "/observe%252F[redacted]"],
    // Hidden behind percent-encoding from both rules: the whole URL is redacted.
    [`/%6Fbserve/%62${token.slice(1)}`, "[redacted]"],
    [`/x?t=%62${token.slice(1)}`, "[redacted]"],
    ["/api/v1/log/entries?q=%41%42", "/api/v1/log/entries?q=%41%42"],
  ];
  for (const [url, logged] of cases) {
    it(`writes ${url.replace(token, "<token>")} as ${logged}`, () => expect(redactUrl(url)).toBe(logged));
  }
});

describe("the access log of a real server", () => {
  it("keeps path tokens and an observer URL's query values out of log lines and 404 answers", async () => {
    const log = logLines();
    const query_secret = "canary-upstream-api-key-0123456789";
    // The production logger options, writing to `log`.
    const app = await buildServer({ logger: { ...(loggerOptions("info") as object), stream: log.stream } });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      for (const path of [`/Observe/${token}`, `//observe/${token}`, `/observe%2F${token}`, `/observe/x/mcp?api_key=${query_secret}`]) {
        const answer = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
        expect(answer.status).toBe(404);
        const text = await answer.text();
        expect(text).not.toContain(token);
        expect(text).not.toContain(query_secret);
      }
    } finally {
      await app.close();
    }
    expect(log.text()).toContain("[redacted]");
    expect(log.text()).not.toContain(token);
    expect(log.text()).not.toContain(query_secret);
  });

  it("logs a request Node cannot parse by its error alone, even at trace level: never its bytes, headers included", async () => {
    const log = logLines();
    const app = await buildServer({ logger: { ...(loggerOptions("trace") as object), stream: log.stream } });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const canary = "Bearer canary-client-error-0123456789";
    try {
      const socket = connect((app.server.address() as AddressInfo).port, "127.0.0.1");
      socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: ${canary}\r\nx-bursar-observer-token: ${token}\r\nBad Header Line\r\n\r\n`);
      const answer = await new Promise<string>((resolve) => {
        let text = "";
        socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
        socket.on("close", () => resolve(text));
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request/);
    } finally {
      await app.close();
    }
    expect(log.text()).toContain("client error");
    // Fastify's own handler logged the error whole: its rawPacket is the request's bytes, as numbers.
    expect(log.text()).not.toContain("rawPacket");
    expect(log.text()).not.toContain("canary-client-error");
    expect(log.text()).not.toContain(token);
  });
});
