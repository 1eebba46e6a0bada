// `bursar buyer --llm` with a model endpoint that is not a URL, refuses the key (401) or has
// nothing listening: one line naming BURSAR_LLM_BASE_URL and the failure, no stack trace, and
// never the API key. Everything is on loopback; nothing reaches the network.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

const api_key = "sk-test-do-not-print-0123456789";

function listening(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

function closed(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

function oneLine(stderr: string): string {
  const lines = stderr.trimEnd().split("\n");
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toContain(api_key);
  return lines[0]!;
}

describe("bursar buyer --llm with a failing model endpoint", () => {
  let gate: TestServer;
  let token: string;
  let refusing: Server;
  let refusing_url: string;
  let unused_url: string;
  let model_requests = 0;

  beforeAll(async () => {
    ensureBuilt();
    gate = await testServer();
    token = (await gate.agent("llm-buyer")).token;
    // Stands in for an OpenAI-compatible endpoint that refuses the key, echoing it as some do.
    refusing = createServer((request, response) => {
      model_requests++;
      request.resume();
      response.writeHead(401, { "content-type": "application/json" });
      // With a control sequence that would clear a terminal: it is quoted escaped.
      response.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${api_key}\u001b[2J`, type: "invalid_request_error", code: "invalid_api_key" } }));
    });
    refusing_url = `http://127.0.0.1:${await listening(refusing)}/v1`;
    unused_url = `http://127.0.0.1:${await freePort()}/v1`;
  });
  afterAll(async () => {
    await closed(refusing);
    await gate.close();
  });

  const run = (base_url: string) =>
    runBursar(["buyer", "--llm", "--url", gate.url, "--token", token], { BURSAR_LLM_BASE_URL: base_url, BURSAR_LLM_API_KEY: api_key, BURSAR_LLM_MODEL: "test-model" });

  it.each([
    { what: "not a URL", base_url: "notaurl", said: 'BURSAR_LLM_BASE_URL "notaurl": expected an http(s) URL, e.g. https://api.openai.com/v1' },
    // The credentials are not printed.
    { what: "a URL with credentials", base_url: "https://someone:hunter2-secret@llm.example/v1", said: "BURSAR_LLM_BASE_URL: a URL with user:password@ is not supported; put the key in BURSAR_LLM_API_KEY" },
    // The client appended its path inside the query, and the URL was repeated in every failure.
    ...["https://llm.example/v1?key=hunter2-secret", "https://llm.example/v1#hunter2-secret"].map((base_url) => ({
      what: "a URL with a query or fragment",
      base_url,
      said: "BURSAR_LLM_BASE_URL: a base URL has no query (?…) or fragment (#…) (the value is not shown), e.g. https://api.openai.com/v1",
    })),
    { what: "a URL with whitespace around it", base_url: "https://llm.example/v1 ", said: "BURSAR_LLM_BASE_URL: begins or ends with whitespace (the value is not shown); expected a URL without it" },
  ])("refuses a BURSAR_LLM_BASE_URL that is $what in one line naming it, exit 2", async ({ base_url, said }) => {
    const result = await run(base_url);
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toBe(`bursar buyer: ${said}`);
  });

  it.each([`${api_key}\n`, `${api_key}\r\n`, `sk-test\u0007${api_key}`])("refuses a BURSAR_LLM_API_KEY holding a line break or control character (%#) in one line without the key, exit 2", async (key) => {
    // Before, the model client threw a stack trace quoting the header, key included.
    const result = await runBursar(["buyer", "--llm", "--url", gate.url, "--token", token], { BURSAR_LLM_BASE_URL: refusing_url, BURSAR_LLM_API_KEY: key, BURSAR_LLM_MODEL: "test-model" });
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toBe("bursar buyer: BURSAR_LLM_API_KEY holds whitespace or a control character (a pasted line break?): set it to the API key alone");
  });

  it("does not redact a key shorter than 8 characters (a local endpoint's placeholder) out of every word the endpoint said", async () => {
    const result = await runBursar(["buyer", "--llm", "--url", gate.url, "--token", token], { BURSAR_LLM_BASE_URL: refusing_url, BURSAR_LLM_API_KEY: "k", BURSAR_LLM_MODEL: "test-model" });
    expect(result.code).toBe(1);
    // (The stand-in endpoint quotes its own fixed key, not the one sent.)
    expect(result.stderr).toContain("Incorrect API key provided: ");
  });

  it("reports an endpoint answering 401 as one line with the status and without the key, exit 1", async () => {
    const result = await run(refusing_url);
    expect(model_requests).toBeGreaterThan(0);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toBe(
      `bursar buyer: the model endpoint BURSAR_LLM_BASE_URL (${refusing_url}) answered HTTP 401: Incorrect API key provided: [redacted]\\u001b[2J; check BURSAR_LLM_API_KEY`,
    );
  });

  it("reports an endpoint with nothing listening as one line naming the connection error, exit 1", async () => {
    const result = await run(unused_url);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toBe(`bursar buyer: the model endpoint BURSAR_LLM_BASE_URL (${unused_url}) could not be reached (connection error: ECONNREFUSED)`);
  });
});
