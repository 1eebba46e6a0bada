// `bursar admin rotate` against a real data directory: the new token works only after the
// server restarts, the old one stops; refused while BURSAR_ADMIN_TOKEN is set.

import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { operator_token_hash_file } from "../../src/datadir.js";
import { startServer } from "../../src/server/start.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";

async function createAgentStatus(url: string, token: string): Promise<number> {
  const response = await fetch(`${url}/api/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "probe" }),
  });
  await response.arrayBuffer();
  return response.status;
}

describe("bursar admin rotate", () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), "bursar-admin-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("issues a token the server accepts after a restart, and the old one stops working", async () => {
    const config = loadConfig({ BURSAR_DATA_DIR: dir, BURSAR_PORT: "0" });
    const first = await startServer(config, { logger: false });
    const old_token = first.generated_token as string;
    expect(old_token).toMatch(/^bsr_op_/);

    const rotate = await runBursar(["admin", "rotate"], { BURSAR_DATA_DIR: dir, BURSAR_ADMIN_TOKEN: "", BURSAR_DB: "" });
    expect(rotate.code).toBe(0);
    const new_token = /bsr_op_\S+/.exec(rotate.stdout)?.[0] as string;
    expect(new_token).toBeDefined();
    expect(new_token).not.toBe(old_token);
    expect(rotate.stdout).toContain("restart");
    expect(statSync(join(dir, operator_token_hash_file)).mode & 0o777).toBe(0o600);

    try {
      // The running server keeps the token it loaded, as rotate says.
      expect(await createAgentStatus(first.url, old_token)).toBe(201);
      expect(await createAgentStatus(first.url, new_token)).toBe(401);
    } finally {
      await first.app.close();
    }

    const restarted = await startServer(config, { logger: false });
    try {
      expect(restarted.generated_token).toBeUndefined();
      expect(await createAgentStatus(restarted.url, new_token)).toBe(201);
      expect(await createAgentStatus(restarted.url, old_token)).toBe(401);
    } finally {
      await restarted.app.close();
    }
  });

  it("refuses with exit 2 and leaves the stored hash alone while BURSAR_ADMIN_TOKEN is set", async () => {
    const before = readFileSync(join(dir, operator_token_hash_file), "utf8");
    const refused = await runBursar(["admin", "rotate"], { BURSAR_DATA_DIR: dir, BURSAR_ADMIN_TOKEN: "an-env-token-of-enough-length" });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("BURSAR_ADMIN_TOKEN is set");
    expect(refused.stdout).toBe("");
    expect(readFileSync(join(dir, operator_token_hash_file), "utf8")).toBe(before);
  });
});
