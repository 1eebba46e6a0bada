// `bursar send-decisions` as a real process: receipts already on disk survive a failed
// re-run, and a missing file, a URL without a scheme or an unreachable server is one line.

import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";
import { ndjson, record } from "../ingest/support.js";

let server: TestServer;
beforeAll(async () => {
  ensureBuilt();
  server = await testServer();
});
afterAll(async () => server.close());

const key_env = { BURSAR_SOURCE_SIGNING_KEY: "bsr_whsec_not-used-before-the-failure" };

function oneLine(stderr: string): string {
  const lines = stderr.trimEnd().split("\n");
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

describe("bursar send-decisions", () => {
  it("keeps the receipts of an earlier run when a re-run is refused", async () => {
    const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "keep-receipts" });
    const env = { BURSAR_SOURCE_SIGNING_KEY: created.body.signing_key };
    const good = join(server.dir, "keep-good.jsonl");
    const bad = join(server.dir, "keep-bad.jsonl");
    const receipts = join(server.dir, "keep-receipts.jsonl");
    writeFileSync(good, ndjson([record("evt_keep_1"), record("evt_keep_2")]));
    writeFileSync(bad, ndjson([record("evt_keep_3", { agent: { idd: "x", type: "agent" } })]));
    const first = await runBursar(["send-decisions", good, "--url", server.url, "--source", created.body.id, "--receipts", receipts], env);
    expect(first.code).toBe(0);
    const kept = readFileSync(receipts, "utf8");
    expect(kept.trim().split("\n")).toHaveLength(1);

    const refused = await runBursar(["send-decisions", bad, "--url", server.url, "--source", created.body.id, "--receipts", receipts], env);
    expect(refused.code).toBe(1);
    expect(readFileSync(receipts, "utf8")).toBe(kept);

    const again = await runBursar(["send-decisions", good, "--url", server.url, "--source", created.body.id, "--receipts", receipts], env);
    expect(again.code).toBe(0);
    const lines = readFileSync(receipts, "utf8").trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(kept.trim());
  });

  it("names a missing FILE in one line and exits 2", async () => {
    const missing = join(mkdtempSync(join(tmpdir(), "bursar-sd-")), "nope.jsonl");
    const result = await runBursar(["send-decisions", missing, "--url", server.url, "--source", "src_x"], key_env);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe(`bursar send-decisions: cannot read ${missing} (ENOENT)`);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("refuses a --url without a scheme in one line naming --url and exits 2", async () => {
    const file = join(server.dir, "scheme.jsonl");
    writeFileSync(file, ndjson([record("evt_scheme")]));
    const result = await runBursar(["send-decisions", file, "--url", "127.0.0.1:8787", "--source", "src_x"], key_env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--url "127.0.0.1:8787": expected an http(s) URL');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("names an unreachable server in one line, keeps the receipts file, and exits 1", async () => {
    const file = join(server.dir, "unreachable.jsonl");
    const receipts = join(server.dir, "unreachable-receipts.jsonl");
    writeFileSync(file, ndjson([record("evt_unreachable")]));
    writeFileSync(receipts, '{"earlier":"receipt"}\n');
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--receipts", receipts], key_env);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toMatch(new RegExp(`^bursar send-decisions: cannot reach ${url}/ingest/src_x \\(ECONNREFUSED\\); lines 1\\.\\.1 not sent`));
    expect(readFileSync(receipts, "utf8")).toBe('{"earlier":"receipt"}\n');
  });
});
