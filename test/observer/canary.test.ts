// A real `bursar serve` process: a canary Authorization header the gateway injects reaches
// the MCP server but never the database, the log or the process output; the path token is
// redacted from Bursar's own access logs.

import { readdirSync, readFileSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, startBursar, type BursarProcess } from "../support/process.js";
import { rawSession, sdkClient, toolCall, raw, LATEST_PROTOCOL_VERSION } from "./support.js";
import { startUpstream, type Upstream } from "./upstream.js";

const operator = "canary-operator-token-0123456789";
const canary = "Bearer CANARY-f3a9c2e1-do-not-store";
let upstream: Upstream;
let bursar: BursarProcess;
let dir: string;

beforeAll(async () => {
  ensureBuilt();
  upstream = await startUpstream();
  dir = mkdtempSync(join(tmpdir(), "bursar-canary-"));
  bursar = await startBursar(["serve"], { BURSAR_DATA_DIR: dir, BURSAR_PORT: String(await freePort()), BURSAR_ADMIN_TOKEN: operator, BURSAR_LOG_LEVEL: "info" });
});
afterAll(async () => {
  await bursar?.stop();
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("headers are forwarded, never stored or logged", () => {
  it("keeps a canary Authorization value out of the database, the log and stdout", async () => {
    const created = await fetch(`${bursar.url}/api/v1/evidence-sources`, {
      method: "POST",
      headers: { authorization: `Bearer ${operator}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "observer", name: "canary", upstream_url: `${upstream.url}/mcp` }),
    });
    const source = (await created.json()) as { observer_url: string; observer_token: string };
    const client = await sdkClient(source.observer_url, { "x-bursar-observer-token": source.observer_token, authorization: canary });
    await client.callTool({ name: "echo", arguments: { text: "canary run" } });
    await client.close();
    const path_url = `${bursar.url}/observe/${source.observer_token}`;
    const session = await rawSession(path_url, { authorization: canary });
    await raw(path_url, "POST", { authorization: canary, "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION }, toolCall(9, "echo", { text: "path" }));
    expect(upstream.seen.filter((seen) => seen.headers.authorization === canary).length).toBeGreaterThan(2);

    // Observed calls are written off the critical path (batched every 100 ms): wait for them.
    let log_text = "";
    for (let attempt = 0; attempt < 50 && !(log_text.includes("canary run") && log_text.includes('"path"')); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      log_text = await (await fetch(`${bursar.url}/api/v1/log/entries?start=0`, { headers: { authorization: `Bearer ${operator}` } })).text();
    }
    expect(log_text).toContain("canary run");
    expect(log_text).toContain('"path"');
    await bursar.stop();
    const output = bursar.output();
    expect(output).toContain("/observe/[redacted]");
    expect(output).not.toContain(source.observer_token);
    expect(log_text).not.toContain("CANARY");
    expect(output).not.toContain("CANARY");
    for (const file of readdirSync(dir)) expect(readFileSync(join(dir, file)).includes("CANARY"), file).toBe(false);
  });
});
