// `bursar send-decisions` behind a proxy that answers a delivery with a redirect: it is not
// followed (following a 307/308 failed as "cannot reach … detached ArrayBuffer … the server may
// have stored them"); the run stops in one line naming the Location, saying nothing was stored
// by that delivery and which --url reaches the server it points to, exit 1, receipts kept.

import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type OutgoingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtSuiteDir } from "../support/build.js";
import { runBursar } from "../support/process.js";
import { ndjson, record } from "../ingest/support.js";

const dir = builtSuiteDir("bursar-send-redirect-");
const key_env = { BURSAR_SOURCE_SIGNING_KEY: "bsr_whsec_not-used-the-proxy-redirects" };

// The answer the proxy gives every request, set by each test; the paths it was asked for.
let answer: { status: number; headers: OutgoingHttpHeaders } = { status: 308, headers: {} };
let asked: string[] = [];
let base = "";
const proxy: Server = createServer((request, response) => {
  asked.push(request.url ?? "");
  request.resume();
  request.on("end", () => {
    response.writeHead(answer.status, answer.headers);
    response.end("moved");
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

async function sendThroughProxy(status: number, headers: OutgoingHttpHeaders): Promise<{ code: number | null; stdout: string; stderr: string; receipts: string }> {
  answer = { status, headers };
  asked = [];
  const file = join(dir(), `redirected-${status}.jsonl`);
  const receipts = join(dir(), `redirected-${status}-receipts.jsonl`);
  writeFileSync(file, ndjson([record(`evt_redirect_${status}_1`), record(`evt_redirect_${status}_2`)]));
  writeFileSync(receipts, '{"earlier":"receipt"}\n');
  const result = await runBursar(["send-decisions", file, "--url", base, "--source", "src_x", "--receipts", receipts], key_env, undefined, 60_000);
  return { ...result, receipts: readFileSync(receipts, "utf8") };
}

describe("bursar send-decisions answered with a redirect", () => {
  it("stops at a 308 in one line naming the Location and the --url to pass, says nothing was stored, exit 1, receipts kept", async () => {
    const sent = await sendThroughProxy(308, { location: `${base}/moved/ingest/src_x` });
    expect(sent.stderr).toBe(
      `bursar send-decisions: delivery of lines 1..2 was answered HTTP 308, a redirect to ${base}/moved/ingest/src_x, not followed: nothing was stored by it (0 records accepted before it); to send there, pass --url ${base}/moved\n`,
    );
    expect(sent.code).toBe(1);
    expect(sent.stdout).toBe("");
    // Asked once, and the redirect's target never.
    expect(asked).toEqual(["/ingest/src_x"]);
    expect(sent.receipts).toBe('{"earlier":"receipt"}\n');
  });

  it("reads a 307's relative Location against the address it posted to", async () => {
    const sent = await sendThroughProxy(307, { location: "/v2/ingest/src_x" });
    expect(sent.stderr).toBe(
      `bursar send-decisions: delivery of lines 1..2 was answered HTTP 307, a redirect to ${base}/v2/ingest/src_x, not followed: nothing was stored by it (0 records accepted before it); to send there, pass --url ${base}/v2\n`,
    );
    expect(sent.code).toBe(1);
    expect(asked).toEqual(["/ingest/src_x"]);
  });

  it("names a Location elsewhere (a login page) without guessing a --url, and never shows credentials in it", async () => {
    const sent = await sendThroughProxy(302, { location: `${base.replace("//", "//user:secret@")}/sso?next=1` });
    expect(sent.stderr).toBe(
      `bursar send-decisions: delivery of lines 1..2 was answered HTTP 302, a redirect to ${base}/sso?next=1, not followed: nothing was stored by it (0 records accepted before it); pass the Bursar server's own address as --url\n`,
    );
    expect(asked).toEqual(["/ingest/src_x"]);
    expect(sent.code).toBe(1);
  });

  it("says a 3xx without a Location is a redirect not followed", async () => {
    const sent = await sendThroughProxy(301, {});
    expect(sent.stderr).toBe("bursar send-decisions: delivery of lines 1..2 was answered HTTP 301, a redirect without a Location, not followed: nothing was stored by it (0 records accepted before it)\n");
    expect(sent.code).toBe(1);
    expect(sent.receipts).toBe('{"earlier":"receipt"}\n');
  });
});
