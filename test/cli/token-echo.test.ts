// A server that quotes the Authorization header back in its error text (a proxy's debug answer,
// whatever --url reaches) gets no token printed: `bursar block`, `agent` and `buyer` redact the
// operator and agent tokens they sent from what they print, as `bursar mcp-stdio` does. And an
// `agent create` answered 200 without an agent is refused in one line, not printed as
// `export BURSAR_AGENT_TOKEN=undefined`.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redacted, redacted_token_chars_min } from "../../src/cli/command.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

const operator_token = "bsr_op_operator-token-echoed-0123456789";
const agent_token = "bsr_agent_agent-token-echoed-0123456789";

/** Answers every request with `status` and `body(the request's Authorization header)`. */
async function echoServer(status: number, body: (authorization: string) => unknown): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(body(request.headers.authorization ?? "")));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("a server that quotes the token it was sent", () => {
  let echo: { server: Server; url: string };
  beforeAll(async () => {
    ensureBuilt();
    echo = await echoServer(500, (authorization) => ({ error: { code: "x", message: `got auth ${authorization}` } }));
  });
  afterAll(() => new Promise<void>((resolve) => echo.server.close(() => resolve())));

  const operator_commands = [
    ["block", "create", "--agent", "agt_1", "--currency", "INR"],
    ["agent", "create", "--name", "buyer-1"],
    ["agent", "disable", "agt_1"],
  ];
  it.each(operator_commands.map((args) => ({ command: args.slice(0, 2).join(" "), args })))("bursar $command prints the server's error without the operator token", async ({ command, args }) => {
    const result = await runBursar(args, { BURSAR_URL: echo.url, BURSAR_ADMIN_TOKEN: operator_token }, undefined, 30_000);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`bursar ${command}: HTTP 500 x: got auth Bearer [redacted]\n`);
    expect(result.stdout).toBe("");
  });

  it.each([{ transport: "HTTP", extra: [] }, { transport: "stdio", extra: ["--stdio"] }])("bursar buyer over $transport prints the server's error without the agent token", async ({ extra }) => {
    const result = await runBursar(["buyer", "--scripted", ...extra, "--url", echo.url], { BURSAR_AGENT_TOKEN: agent_token }, undefined, 60_000);
    expect(result.code).toBe(1);
    expect(`${result.stdout}${result.stderr}`).not.toContain(agent_token);
    expect(result.stderr).toContain("got auth Bearer [redacted]");
  });
});

describe("redacted", () => {
  it("takes out a token holding a quote or a backslash as sent and as a JSON string writes it", () => {
    const token = 'op"tok\\en-0123456789';
    const text = `${token} ${JSON.stringify({ message: `got auth Bearer ${token}` })}`;
    expect(redacted(text, [token])).toBe('[redacted] {"message":"got auth Bearer [redacted]"}');
  });

  it("leaves a token shorter than redacted_token_chars_min alone: a key 'k' took the k out of every word", () => {
    expect(redacted("check the api-key", ["k".repeat(redacted_token_chars_min - 1)])).toBe("check the api-key");
    expect(redacted("check the api-key", ["k"])).toBe("check the api-key");
    expect(redacted("sent 12345678", ["12345678"])).toBe("sent [redacted]");
  });
});

describe("bursar agent create answered 200 without an agent", () => {
  let empty: { server: Server; url: string };
  beforeAll(async () => {
    ensureBuilt();
    empty = await echoServer(200, () => ({}));
  });
  afterAll(() => new Promise<void>((resolve) => empty.server.close(() => resolve())));

  it("refuses the answer in one line, exit 1, printing no export line", async () => {
    const result = await runBursar(["agent", "create", "--name", "buyer-1"], { BURSAR_URL: empty.url, BURSAR_ADMIN_TOKEN: operator_token }, undefined, 30_000);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe("bursar agent create: the server answered without an agent_id and an agent token (is --url/BURSAR_URL a Bursar server?); no agent to show\n");
    expect(result.stdout).toBe("");
  });
});
