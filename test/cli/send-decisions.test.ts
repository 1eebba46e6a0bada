// `bursar send-decisions` as a real process: receipts already on disk survive a failed
// re-run, and a missing file, a URL without a scheme or an unreachable server is one line;
// how a file becomes deliveries (both limits, blank lines, CRLF, a byte order mark), and a
// record written over several lines refused before anything is sent.

import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../support/build.js";
import { freePort, runBursar } from "../support/process.js";
import { testServer, type TestServer } from "../support/server.js";
import { delivery_bytes_max, records_per_delivery_max } from "../../src/ingest/delivery.js";
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
    expect(sent.stdout).toContain("sent 3 records in 1 deliveries: 3 new, 0 already received");
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
    expect(sent.stdout).toContain("sent 2 records in 1 deliveries: 2 new, 0 already received");
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
    expect(again.stdout).toContain("sent 1 records in 1 deliveries: 1 new, 0 already received");
  });
});
