// An operator command's error line is cut short at 500 characters: the token a server quotes
// back is taken out before the cut, so no part of it is printed (cut first, a token split by the
// cut was no longer found, and all but its last characters were printed).

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

const operator_token = "bsr_op_operator-token-cut-short-0123456789abcdef";
let server: Server;
let url: string;

beforeAll(async () => {
  ensureBuilt();
  // Not JSON, so printed as text: the token lands across the 500th character.
  server = createServer((request, response) => {
    request.resume();
    request.on("end", () => response.writeHead(502).end(`${"x".repeat(480)} ${request.headers.authorization ?? ""}`));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

it("bursar agent create prints no part of a token the server quotes back where the line is cut", async () => {
  const result = await runBursar(["agent", "create", "--name", "buyer-1"], { BURSAR_URL: url, BURSAR_ADMIN_TOKEN: operator_token }, undefined, 30_000);
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(/^bursar agent create: HTTP 502: x{480} Bearer \[redacted\]\n$/);
  expect(result.stderr).not.toContain(operator_token.slice(0, 12));
});
