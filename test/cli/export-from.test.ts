// bursar export --from URL: an auditor with a token and no database writes the same export the
// database gives (entries and receipts byte for byte), ending on the server's latest signed
// checkpoint, and `bursar verify --all-receipts` accepts it. A server whose entries do not hash
// to the leaf hashes it sends is refused; a bad token is one line without the token.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportLog } from "../../src/evidence/export.js";
import { ensureBuilt } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";

let server: TestServer;
let dir: string;
let auditor_token: string;

beforeAll(async () => {
  ensureBuilt();
  server = await testServer();
  dir = mkdtempSync(join(tmpdir(), "bursar-export-from-"));
  const agent = await server.agent("export-from");
  const client = await server.client(agent.token);
  // Entries of every sort an order makes: a decision, its settlement, a refusal.
  await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "INR" } });
  await client.callTool({ name: "create_order", arguments: { amount: 5_000, currency: "USD" } });
  const auditor = await server.api<{ token: string }>("POST", "/api/v1/auditor-tokens", { name: "outside auditor" });
  auditor_token = auditor.body.token;
  await server.started.bursar.log.checkpoint();
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The export the database gives at `size`: its lines other than the header and checkpoints. */
async function databaseLines(size: number): Promise<string[]> {
  const chunks: string[] = [];
  await exportLog(server.started.bursar.driver, { size, exported_at: "", write: async (text) => void chunks.push(text) });
  return chunks.join("").split("\n").filter((line) => line.startsWith('{"body":') || line.startsWith('{"receipt":'));
}

const env = () => ({ BURSAR_DATA_DIR: join(dir, "unused-data"), BURSAR_AUDITOR_TOKEN: auditor_token, BURSAR_ADMIN_TOKEN: "" });

describe("bursar export --from URL", () => {
  it("writes the database's export from the log routes, and it verifies with every receipt", async () => {
    const out = join(dir, "remote.jsonl");
    const checkpoint = join(dir, "remote-cp.txt");
    const exported = await runBursar(["export", "--from", server.url, "--out", out, "--checkpoint", checkpoint], env());
    expect(exported.stderr).toMatch(/^exported entries: 0\/\d+\nexported entries: (\d+)\/\1\n$/);
    expect(exported.code).toBe(0);
    const note = readFileSync(checkpoint, "utf8");
    const size = Number(note.split("\n")[1]);
    expect(exported.stdout).toBe(
      `exported ${size} entries and 1 checkpoints to ${out} (${readFileSync(out).length} bytes)\nsigned checkpoint for size ${size} written to ${checkpoint}\n`,
    );
    const lines = readFileSync(out, "utf8").split("\n");
    expect(JSON.parse(lines[0] as string)).toMatchObject({ bursar_export: { v: 1, origin: "bursar.local/log", tree_size: size } });
    expect(lines.filter((line) => line.startsWith('{"body":') || line.startsWith('{"receipt":'))).toEqual(await databaseLines(size));
    const key = server.started.bursar.log.verifierKey;
    const verified = await runBursar(["verify", out, "--checkpoint", checkpoint, "--key", key, "--all-receipts"], env());
    expect(verified.stderr).toBe("");
    expect(verified.code).toBe(0);
  });

  it("refuses a token the server refuses in one line without the token, exit 2, leaving earlier files as they were", async () => {
    const out = join(dir, "earlier.jsonl");
    const checkpoint = join(dir, "earlier-cp.txt");
    writeFileSync(out, "an earlier export\n");
    const wrong = "bursar_aud_wrong0123456789abcdefghijklmnop";
    const refused = await runBursar(["export", "--from", server.url, "--out", out, "--checkpoint", checkpoint], { ...env(), BURSAR_AUDITOR_TOKEN: wrong });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^exported entries: 0\/\d+\nbursar export: --from: GET \/api\/v1\/log\/entries\?start=0&end=\d+ answered HTTP 401 \(an auditor or operator token/);
    expect(refused.stderr).not.toContain(wrong);
    // The earlier export is as it was, no --checkpoint file was left behind, nor a staged one.
    expect(readFileSync(out, "utf8")).toBe("an earlier export\n");
    expect(existsSync(checkpoint)).toBe(false);
    expect(readdirSync(dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });

  /** Runs export --from against a server answering `answer`, after the real server's checkpoint. */
  async function fromLyingServer(answer: (path: string, response: ServerResponse) => void): Promise<{ code: number | null; stderr: string; out: string }> {
    const checkpoint = await (await fetch(`${server.url}/api/v1/log/checkpoint`)).text();
    const lying: Server = createServer((request, response) => {
      if (request.url === "/api/v1/log/checkpoint") return void response.end(checkpoint);
      answer(request.url ?? "", response);
    });
    await new Promise<void>((resolve) => lying.listen(0, "127.0.0.1", resolve));
    try {
      const out = join(dir, `lying-${Date.now()}.jsonl`);
      const url = `http://127.0.0.1:${(lying.address() as AddressInfo).port}`;
      const run = await runBursar(["export", "--from", url, "--out", out], env());
      return { code: run.code, stderr: run.stderr, out };
    } finally {
      await new Promise((resolve) => lying.close(resolve));
    }
  }

  async function pages(change: (entries: Array<Record<string, unknown>>) => void) {
    const size = await server.started.bursar.log.treeSize();
    const entries = (await server.started.bursar.log.entries(0, size)).map((entry) => ({ ...entry }) as Record<string, unknown>);
    change(entries);
    return JSON.stringify({ start: 0, end: size, tree_size: size, entries });
  }

  it.each([
    ["an entry whose bytes do not hash to the leaf hash sent with it", "entry 1's canonical bytes do not hash to the leaf hash the server sent with it"],
    ["more entries than asked for", "more than the"],
    ["a body that is not JSON", "is not JSON, so not a page of log entries"],
    ["a page of nulls", "is not a page of log entries"],
  ])("stops on a server that sends %s: one line, exit 2, nothing written", async (what, said) => {
    const body = {
      "an entry whose bytes do not hash to the leaf hash sent with it": () => pages((entries) => void (entries[1] = { ...entries[1], entry: { ...(entries[1]!.entry as object), kind: "changed" } })),
      "more entries than asked for": () => pages((entries) => void entries.push(...entries)),
      "a body that is not JSON": async () => "<html>proxy error</html>",
      "a page of nulls": async () => JSON.stringify({ start: 0, end: 1, entries: [null] }),
    }[what]!;
    const text = await body();
    const run = await fromLyingServer((_path, response) => response.end(text));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`\nbursar export: --from: .*${said.replace(/[()]/g, "\\$&")}`));
    expect(existsSync(run.out)).toBe(false);
  });

  it("never prints the token, even one a server quotes back past where the message is cut", async () => {
    const run = await fromLyingServer((_path, response) => {
      response.statusCode = 401;
      response.end(`${"x".repeat(241)}Bearer ${auditor_token}`);
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("[redacted]");
    expect(run.stderr).not.toContain(auditor_token.slice(0, 16));
  });

  it("follows no redirect: the token goes only to --from", async () => {
    let seen: string | undefined;
    const other: Server = createServer((request, response) => {
      seen = request.headers.authorization ?? "none";
      response.end("{}");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const run = await fromLyingServer((path, response) => {
        response.statusCode = 307;
        response.setHeader("location", `http://127.0.0.1:${(other.address() as AddressInfo).port}${path}`);
        response.end();
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("answered HTTP 307, a redirect, which is not followed");
      expect(seen).toBeUndefined();
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it("needs a token, and takes --token only with --from", async () => {
    const none = await runBursar(["export", "--from", server.url, "--out", join(dir, "none.jsonl")], { ...env(), BURSAR_AUDITOR_TOKEN: "" });
    expect(none).toMatchObject({ code: 2, stdout: "" });
    expect(none.stderr).toMatch(/^bursar export: --from needs a token that reads the log: set BURSAR_AUDITOR_TOKEN/);
    const stray = await runBursar(["export", "--token", "x", "--out", join(dir, "stray.jsonl")], env());
    expect(stray).toMatchObject({ code: 2, stdout: "" });
    expect(stray.stderr).toMatch(/^bursar export: --token is for --from URL/);
  });
});
