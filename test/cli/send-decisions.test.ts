// `bursar send-decisions` as a real process: receipts already on disk survive a failed
// re-run, and a missing file, a URL without a scheme or with credentials, an unreachable server
// or a 2xx answer that is not the delivery's receipt is one line; a delivery answered 503 busy is
// sent again after its Retry-After; how a file becomes deliveries
// (both limits, blank lines, CRLF, a byte order mark), and a record written over several lines
// refused before anything is sent.

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bursar_bin, ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { RawConnection } from "../support/raw-connection.js";
import { testServer, type TestServer } from "../support/server.js";
import { delivery_bytes_max, records_per_delivery_max } from "../../src/ingest/delivery.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { ingest_unproven_bytes_max } from "../../src/server/routes/ingest.js";
import { unproven_body_retry_after_seconds } from "../../src/server/unproven-bodies.js";
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

interface Sent {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Each receipt's records, one array per delivery, in order. */
  receipts: Array<Array<{ event_id: string; sha256: string }>>;
}

let sources = 0;

/** Writes `content` to a file and sends it to a new decisions source, with receipts. */
async function send(content: string | Buffer, extra: string[] = []): Promise<Sent & { resend(again: string | Buffer): Promise<Sent> }> {
  sources += 1;
  const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: `send-${sources}` });
  const run = async (body: string | Buffer, name: string): Promise<Sent> => {
    const file = join(server.dir, `${name}.jsonl`);
    const receipts = join(server.dir, `${name}-receipts.jsonl`);
    writeFileSync(file, body);
    writeFileSync(receipts, "");
    const result = await runBursar(["send-decisions", file, "--url", server.url, "--source", created.body.id, "--receipts", receipts, ...extra], {
      BURSAR_SOURCE_SIGNING_KEY: created.body.signing_key,
    });
    const lines = readFileSync(receipts, "utf8").split("\n").filter((line) => line !== "");
    return { ...result, receipts: lines.map((line) => (JSON.parse(line) as { records: Array<{ event_id: string; sha256: string }> }).records) };
  };
  const first = await run(content, `send-${sources}`);
  return { ...first, resend: (again) => run(again, `send-${sources}-again`) };
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** A record whose JSON line, with its LF, is exactly `bytes` long. */
function recordLine(event_id: string, bytes: number): string {
  const bare = JSON.stringify(record(event_id, { args: { blob: "" } }));
  const line = JSON.stringify(record(event_id, { args: { blob: "x".repeat(bytes - 1 - bare.length) } }));
  expect(line.length + 1).toBe(bytes);
  return line;
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

  it("--help says a leading byte order mark is left out and each record is one line, hashed without the whitespace around it", async () => {
    const result = await runBursar(["send-decisions", "--help"]);
    expect(result.code).toBe(0);
    const help = result.stdout.replace(/\s+/g, " ");
    expect(help).toContain("One UTF-8 byte order mark (EF BB BF) at the start of FILE");
    expect(help).toContain("Every non-blank line must be one whole JSON record");
    expect(help).toContain("(the line ending and the spaces, tabs and CRs around the text excluded)");
    expect(help).not.toContain("the exact line you wrote");
  });

  it("names a missing FILE in one line and exits 2", async () => {
    const missing = join(server.dir, "nope.jsonl");
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

  it("says, on a signature refusal, that the --source id may be the fault: an unknown id is answered as a wrong key", async () => {
    const file = join(server.dir, "unknown-source.jsonl");
    writeFileSync(file, ndjson([record("evt_unknown_source")]));
    const result = await runBursar(["send-decisions", file, "--url", server.url, "--source", "src_0000000000000000000000"], key_env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("HTTP 401 signature_mismatch");
    expect(result.stderr).toContain("check BURSAR_SOURCE_SIGNING_KEY, and that --source is the id of an enabled decisions source");
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

  it("says a delivery may have been stored when its connection drops after it was sent, not that it was not sent", async () => {
    // A server that reads the whole delivery and closes the connection without answering, as one
    // that stored it and then lost the connection (or a proxy cut it) would look from here.
    let requests = 0;
    const dropping = createServer((request, response) => {
      requests++;
      request.resume();
      request.on("end", () => response.socket?.destroy());
    });
    await new Promise<void>((resolve) => dropping.listen(0, "127.0.0.1", resolve));
    try {
      const file = join(server.dir, "dropped.jsonl");
      writeFileSync(file, ndjson([record("evt_dropped")]));
      const url = `http://127.0.0.1:${(dropping.address() as AddressInfo).port}`;
      const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x"], key_env);
      expect(result.code).toBe(1);
      expect(requests).toBeGreaterThanOrEqual(1);
      const line = oneLine(result.stderr);
      expect(line).toContain("while sending lines 1..1: the server may have stored them before the connection failed");
      expect(line).toContain("re-run the same command");
      expect(line).not.toContain("not sent");
    } finally {
      dropping.close();
    }
  });

  it("gives up a delivery not answered within --timeout, saying it may have been stored, exit 1; a bad --timeout is refused", async () => {
    // A server that reads the delivery and never answers held the run for ever.
    const silent = createServer((request) => request.resume());
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const file = join(server.dir, "unanswered.jsonl");
      writeFileSync(file, ndjson([record("evt_unanswered")]));
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--timeout", "1"], key_env);
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toBe(
        `bursar send-decisions: no whole answer from ${url}/ingest/src_x within 1 s (--timeout) while sending lines 1..1: the server may have stored them (0 records accepted before them); re-run the same command to learn which (records already received return their first receipts)`,
      );
      for (const bad of ["0", "1.5", "3601", "ten", ""]) {
        const refused = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--timeout", bad], key_env);
        expect({ bad, code: refused.code, line: refused.stderr.split("\n")[0] }).toEqual({ bad, code: 2, line: "bursar send-decisions: --timeout must be a whole number of seconds from 1 to 3600" });
      }
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it("writes control and invisible characters the server quotes (a field, an event_id, its message) as escapes, not to the terminal", async () => {
    // A record's args key is the logged agent's choice: quoted raw, it cleared the screen or reordered the line.
    const hostile = "\u001b[2J\u202ex";
    const refusing = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        const error = { code: "invalid_records", message: `1 record is invalid: args.${hostile}`, details: { problems: [{ index: 0, field: `args.${hostile}`, message: "bad" }], records: [{ index: 0, event_id: hostile }] } };
        response.writeHead(422, { "content-type": "application/json" }).end(JSON.stringify({ error }));
      });
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    try {
      const file = join(server.dir, "quoted.jsonl");
      writeFileSync(file, ndjson([record("evt_quoted")]));
      const result = await runBursar(["send-decisions", file, "--url", `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`, "--source", "src_x"], key_env);
      expect(result.code).toBe(1);
      expect(result.stderr).not.toMatch(/[\u001b\u202e]/);
      expect(result.stderr).toContain("HTTP 422 invalid_records: 1 record is invalid: args.\\u{1b}[2J\\u{202e}x");
      expect(result.stderr).toContain("  line 1: args.\\u{1b}[2J\\u{202e}x: bad");
      expect(result.stderr).toContain("  line 1: event_id \\u{1b}[2J\\u{202e}x");
    } finally {
      refusing.close();
    }
  });

  it("refuses a --receipts file it cannot write before sending anything, and exits 2", async () => {
    let requests = 0;
    const counting = createServer((_request, response) => {
      requests++;
      response.end();
    });
    await new Promise<void>((resolve) => counting.listen(0, "127.0.0.1", resolve));
    try {
      const file = join(server.dir, "receipts-unwritable.jsonl");
      writeFileSync(file, ndjson([record("evt_receipts_unwritable")]));
      const receipts = join(server.dir, "no-such-dir", "receipts.jsonl");
      const url = `http://127.0.0.1:${(counting.address() as AddressInfo).port}`;
      const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x", "--receipts", receipts], key_env);
      expect(result.code).toBe(2);
      expect(result.stderr.split("\n")[0]).toBe(`bursar send-decisions: cannot write receipts to ${receipts} (ENOENT); nothing was sent`);
      expect(requests).toBe(0);
    } finally {
      counting.close();
    }
  });

  it.each(["http://127.0.0.1:8787/?x=1", "http://127.0.0.1:8787/#frag", "http://127.0.0.1:8787?"])("refuses --url %s (a query or fragment would swallow the path it appends), exits 2", async (url) => {
    const file = join(server.dir, "query-url.jsonl");
    writeFileSync(file, ndjson([record("evt_query_url")]));
    const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x"], key_env);
    expect(result.code).toBe(2);
    expect(result.stderr.split("\n")[0]).toBe("bursar send-decisions: --url: a base URL has no query (?…) or fragment (#…) (the value is not shown), e.g. http://127.0.0.1:8787");
  });

  it("sends a delivery answered 503 busy again after its Retry-After, saying so on stderr, and finishes", async () => {
    const created = await server.api<{ id: string; signing_key: string }>("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "busy" });
    const file = join(server.dir, "busy.jsonl");
    writeFileSync(file, ndjson([record("evt_busy_1"), record("evt_busy_2")]));
    // Uploads stalled a byte short of their 2 MiB hold the whole budget of bodies read before their senders are known.
    const stalled: RawConnection[] = [];
    try {
      for (let i = 0; i < ingest_unproven_bytes_max / delivery_bytes_max; i++) {
        const connection = await RawConnection.open(server.url);
        const header = signatureHeader([created.body.signing_key], Buffer.from("never sent"), new Date());
        connection.writeHead(`POST /ingest/${created.body.id} HTTP/1.1\ncontent-type: application/x-ndjson\nbursar-signature: ${header}\ncontent-length: ${delivery_bytes_max}`);
        connection.write(Buffer.alloc(delivery_bytes_max - 1, "x"));
        stalled.push(connection);
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      const child = spawn(process.execPath, [bursar_bin, "send-decisions", file, "--url", server.url, "--source", created.body.id], {
        env: { ...process.env, BURSAR_SOURCE_SIGNING_KEY: created.body.signing_key },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      const busy = new Promise<void>((resolve) =>
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString();
          if (stderr.includes("busy")) resolve();
        }),
      );
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      await Promise.race([busy, exited]);
      for (const connection of stalled.splice(0)) connection.destroy();
      expect(await exited).toBe(0);
      expect(oneLine(stderr)).toBe(`bursar send-decisions: lines 1..2: the server is busy (HTTP 503); sending them again in ${unproven_body_retry_after_seconds} s (attempt 2 of 5)`);
      expect(stdout.trim()).toBe("sent 2 records in 1 delivery: 2 new, 0 already received");
    } finally {
      for (const connection of stalled) connection.destroy();
    }
  });
});

describe("bursar send-decisions: from a file to deliveries", () => {
  it(`sends ${records_per_delivery_max + 1} records as ${records_per_delivery_max} and 1, and never more than --batch in a delivery`, async () => {
    const records = Array.from({ length: records_per_delivery_max + 1 }, (_, i) => record(`evt_count_${i}`));
    const sent = await send(ndjson(records));
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain(`sent ${records_per_delivery_max + 1} records in 2 deliveries: ${records_per_delivery_max + 1} new, 0 already received`);
    expect(sent.receipts.map((receipt) => receipt.length)).toEqual([records_per_delivery_max, 1]);
    expect(sent.receipts.flat().map((listed) => listed.event_id)).toEqual(records.map((value) => value.event_id));

    const batched = await send(ndjson(Array.from({ length: 20 }, (_, i) => record(`evt_batch_${i}`))), ["--batch", "7"]);
    expect(batched.code, batched.stderr).toBe(0);
    expect(batched.receipts.map((receipt) => receipt.length)).toEqual([7, 7, 6]);
  });

  it(`fills a delivery up to exactly ${delivery_bytes_max} bytes and starts another for one byte more`, async () => {
    const half = delivery_bytes_max / 2;
    const exact = await send([recordLine("evt_bytes_1", half), recordLine("evt_bytes_2", half), recordLine("evt_bytes_3", half)].join("\n") + "\n");
    expect(exact.code, exact.stderr).toBe(0);
    expect(exact.receipts.map((receipt) => receipt.length)).toEqual([2, 1]);

    const over = await send([recordLine("evt_bytes_4", half), recordLine("evt_bytes_5", half + 1)].join("\n") + "\n");
    expect(over.code, over.stderr).toBe(0);
    expect(over.receipts.map((receipt) => receipt.length)).toEqual([1, 1]);
  });

  it("skips blank lines, reads CRLF, and numbers lines as the file does", async () => {
    const [one, two, three] = ["evt_crlf_1", "evt_crlf_2", "evt_crlf_3"].map((id) => JSON.stringify(record(id)));
    const sent = await send(`\r\n  \t\r\n${one}\r\n\r\n\t${two}  \r\n\n${three}`);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain("sent 3 records in 1 delivery: 3 new, 0 already received");
    // Each record's hash is over its JSON text: no CR, tab or spaces around it.
    expect(sent.receipts.flat().map((listed) => listed.sha256)).toEqual([one, two, three].map((text) => sha256(text!)));

    const bad = JSON.stringify(record("evt_crlf_4", { agent: { idd: "x", type: "agent" } }));
    const refused = await send(`\r\n${JSON.stringify(record("evt_crlf_5"))}\r\n\r\n  \r\n${bad}\r\n`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("delivery of lines 2..5 refused");
    expect(refused.stderr).toMatch(/^ {2}line 5: agent\.idd: /m);
  });

  it("leaves out a UTF-8 byte order mark at the start of the file instead of sending it as part of line 1", async () => {
    const [one, two] = ["evt_bom_1", "evt_bom_2"].map((id) => JSON.stringify(record(id)));
    const sent = await send(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${one}\r\n${two}\r\n`)]));
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain("sent 2 records in 1 delivery: 2 new, 0 already received");
    expect(sent.receipts.flat().map((listed) => listed.sha256)).toEqual([sha256(one!), sha256(two!)]);
  });

  it("refuses a file that is one pretty-printed record instead of counting its lines as records", async () => {
    const pretty = JSON.stringify(record("evt_pretty_alone"), null, 2);
    const sent = await send(`${pretty}\n`);
    expect(sent.code).toBe(2);
    expect(sent.stderr.split("\n")[0]).toBe(
      "bursar send-decisions: line 1 is not JSON on its own: each record must be one line of JSON (write a pretty-printed record on one line, e.g. with jq -c)",
    );
    expect(sent.stdout).toBe("");
  });

  it("refuses a line holding an array of records, or a bare value, before sending anything", async () => {
    const good = JSON.stringify(record("evt_array_good"));
    const array = JSON.stringify([record("evt_array_1"), record("evt_array_2")]);
    for (const [line, what] of [[array, "an array of them"], ["42", "a bare value"]] as const) {
      const sent = await send(`${good}\n${line}\n`);
      expect(sent.code).toBe(2);
      expect(sent.stderr.split("\n")[0]).toBe(`bursar send-decisions: line 2 is not a JSON object: each line must hold one record, not ${what}`);
      expect(sent.receipts).toEqual([]);
    }
  });

  it("refuses a record written over several lines before sending anything, naming its first line", async () => {
    const good = JSON.stringify(record("evt_pretty_good"));
    const pretty = JSON.stringify(record("evt_pretty_split"), null, 2);
    // With --batch 1 the good line would be a delivery of its own, sent before the broken one.
    const sent = await send(`${good}\n\n${pretty}\n`, ["--batch", "1"]);
    expect(sent.code).toBe(2);
    expect(sent.stderr.split("\n")[0]).toMatch(/^bursar send-decisions: line 3 is not JSON on its own: each record must be one line of JSON/);
    expect(sent.stderr).not.toMatch(/\n\s+at /);
    expect(sent.receipts).toEqual([]);
    // Nothing reached the source: the good record is new when sent alone.
    const again = await sent.resend(`${good}\n`);
    expect(again.stdout).toContain("sent 1 record in 1 delivery: 1 new, 0 already received");
  });
});

/** A stand-in for the server on --url that answers each delivery 200 with what `answer` makes of
 *  the event_ids it was sent (and the delivery's 1-based number). */
async function answeringServer(answer: (event_ids: string[], delivery: number) => { content_type: string; body: string }): Promise<{ url: string; close(): Promise<void> }> {
  let deliveries = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      deliveries += 1;
      const lines = Buffer.concat(chunks).toString("utf8").split("\n").filter((line) => line !== "");
      const made = answer(lines.map((line) => (JSON.parse(line) as { event_id: string }).event_id), deliveries);
      response.writeHead(200, { "content-type": made.content_type });
      response.end(made.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The answer Bursar gives, for the event_ids sent. */
function receiptAnswer(event_ids: string[], written = event_ids.length): Record<string, unknown> {
  const records = event_ids.map((event_id, seq) => ({ event_id, seq, leaf_hash: "ab".repeat(32), sha256: "cd".repeat(32), occurred_at: "2026-10-09T14:03:11Z", received_at: "2026-10-09T14:03:12Z" }));
  return {
    source: "src_x",
    delivery_id: "dlv_x",
    records: event_ids.length,
    written,
    duplicates: event_ids.length - written,
    receipt: { source: "src_x", received_at: "2026-10-09T14:03:12Z", records, log: "test.bursar/log", key_id: "1f3a9c2e", signature: "sig" },
  };
}

const json = (value: unknown) => ({ content_type: "application/json; charset=utf-8", body: JSON.stringify(value) });

describe("bursar send-decisions: a 2xx answer that is not the delivery's receipt", () => {
  const cases: Array<{ what: string; answer: (event_ids: string[]) => { content_type: string; body: string }; problem: string }> = [
    {
      what: "a proxy's or captive portal's HTML",
      answer: () => ({ content_type: "text/html", body: "<!DOCTYPE html>\n<html><body>Sign in to Wi-Fi</body></html>" }),
      problem: 'the answer is not JSON (text/html: "<!DOCTYPE html>\\n<html><body>Sign in to Wi-Fi</body></html>")',
    },
    { what: "an empty object", answer: () => json({}), problem: '"records" is missing, not a whole number' },
    { what: "an array", answer: (ids) => json([receiptAnswer(ids)]), problem: "the answer is not a JSON object: [" },
    { what: "a count that is not a number", answer: (ids) => json({ ...receiptAnswer(ids), written: "2" }), problem: '"written" is "2", not a whole number' },
    { what: "counts for another delivery", answer: (ids) => json({ ...receiptAnswer(ids), records: 3 }), problem: "it counts 3 records, 2 written and 0 duplicates, for 2 sent" },
    { what: "no receipt", answer: (ids) => json({ ...receiptAnswer(ids), receipt: undefined }), problem: '"receipt" is missing' },
    { what: "a receipt without its records", answer: (ids) => json({ ...receiptAnswer(ids), receipt: { signature: "sig" } }), problem: '"receipt" is not an object with a records list' },
    { what: "a receipt listing fewer records", answer: (ids) => json({ ...receiptAnswer(ids), receipt: (receiptAnswer(ids.slice(0, 1)) as { receipt: unknown }).receipt }), problem: "the receipt lists 1 records for 2 sent" },
    { what: "a receipt listing the records out of order", answer: (ids) => json({ ...receiptAnswer(ids), receipt: (receiptAnswer([...ids].reverse()) as { receipt: unknown }).receipt }), problem: `the receipt lists "evt_shape_2" where line 1's event_id "evt_shape_1" was sent` },
  ];

  it.each(cases)("$what: one line naming the delivery and the problem, exit 1, nothing written to --receipts", async ({ answer, problem }) => {
    const stub = await answeringServer((ids) => answer(ids));
    try {
      const file = join(server.dir, "shape.jsonl");
      const receipts = join(server.dir, "shape-receipts.jsonl");
      writeFileSync(file, ndjson([record("evt_shape_1"), record("evt_shape_2")]));
      writeFileSync(receipts, '{"earlier":"receipt"}\n');
      const result = await runBursar(["send-decisions", file, "--url", stub.url, "--source", "src_x", "--receipts", receipts], key_env);
      expect(result.code, result.stderr).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toContain(`bursar send-decisions: delivery of lines 1..2 was answered HTTP 200 without its receipt: ${problem}`);
      expect(line).toContain(`nothing written to ${receipts} for it; 0 records accepted before it`);
      expect(result.stdout).toBe("");
      expect(readFileSync(receipts, "utf8")).toBe('{"earlier":"receipt"}\n');
    } finally {
      await stub.close();
    }
  });

  it("keeps the receipts of the deliveries answered before one that is not, and counts only them", async () => {
    const stub = await answeringServer((ids, delivery) => (delivery === 1 ? json(receiptAnswer(ids, 1)) : json({})));
    try {
      const file = join(server.dir, "shape-second.jsonl");
      const receipts = join(server.dir, "shape-second-receipts.jsonl");
      writeFileSync(file, ndjson([record("evt_second_1"), record("evt_second_2"), record("evt_second_3")]));
      const result = await runBursar(["send-decisions", file, "--url", stub.url, "--source", "src_x", "--receipts", receipts, "--batch", "2"], key_env);
      expect(result.code, result.stderr).toBe(1);
      expect(oneLine(result.stderr)).toMatch(/^bursar send-decisions: delivery of lines 3\.\.3 was answered HTTP 200 without its receipt: "records" is missing, not a whole number; nothing written to .* for it; 2 records accepted before it/);
      const kept = readFileSync(receipts, "utf8").trim().split("\n");
      expect(kept).toHaveLength(1);
      expect((JSON.parse(kept[0]!) as { records: Array<{ event_id: string }> }).records.map((listed) => listed.event_id)).toEqual(["evt_second_1", "evt_second_2"]);
    } finally {
      await stub.close();
    }
  });

  it("takes a receipt that lists the event_ids sent, in order, and reports its counts", async () => {
    const stub = await answeringServer((ids) => json(receiptAnswer(ids, 1)));
    try {
      const file = join(server.dir, "shape-good.jsonl");
      writeFileSync(file, ndjson([record("evt_good_1"), record("evt_good_2")]));
      const result = await runBursar(["send-decisions", file, "--url", stub.url, "--source", "src_x"], key_env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toBe("sent 2 records in 1 delivery: 1 new, 1 already received\n");
    } finally {
      await stub.close();
    }
  });

  it("refuses a --url with user:password@ without showing it, before sending anything", async () => {
    const file = join(server.dir, "credentials.jsonl");
    writeFileSync(file, ndjson([record("evt_credentials")]));
    for (const url of [`http://admin:hunter2@127.0.0.1:${new URL(server.url).port}`, "http://hunter2@127.0.0.1:1"]) {
      const result = await runBursar(["send-decisions", file, "--url", url, "--source", "src_x"], key_env);
      expect(result.code).toBe(2);
      expect(result.stderr.split("\n")[0]).toBe(
        "bursar send-decisions: --url: a URL with user:password@ is refused (the value is not shown); credentials go in BURSAR_SOURCE_SIGNING_KEY",
      );
      expect(result.stderr).not.toContain("hunter2");
    }
    // Unparsable with an "@" in it: it may hold credentials, so it is not shown either.
    const unparsable = await runBursar(["send-decisions", file, "--url", "http://u:hunter2@[::1", "--source", "src_x"], key_env);
    expect(unparsable.code).toBe(2);
    expect(unparsable.stderr.split("\n")[0]).toBe("bursar send-decisions: --url (the value is not shown): expected an http(s) URL, e.g. http://127.0.0.1:8787");
  });
});

