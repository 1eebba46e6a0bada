// Deliveries as received: every form, both limits on both sides, all-or-nothing validation
// naming each bad record and field, idempotency per event_id, approval verification, and
// args bound by hash while the stored copy is scrubbed.

import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalJson, canonicalSha256Hex, entry_bytes_max, parseVerifierKey, sha256Hex, verifyDeliveryReceipt, type DeliveryReceipt } from "../../src/evidence/index.js";
import { delivery_bytes_max, records_per_delivery_max } from "../../src/ingest/delivery.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { decisionsSource, deliver, harness, ndjson, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h);
});
afterAll(async () => h.close());

async function entryFor(event_id: string) {
  const found = (await h.entries("ingest.decision")).filter((stored) => (stored.entry.body.record as { event_id: string }).event_id === event_id);
  expect(found).toHaveLength(1);
  return found[0]!.entry;
}

async function stores(body: string, count: number) {
  const before = await h.treeSize();
  const answer = await deliver(h, source, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(answer.body.written).toBe(count);
  expect(answer.body.receipt.records).toHaveLength(count);
  expect(await h.treeSize()).toBe(before + count);
  return answer.body;
}

async function refused(body: string | Buffer, status: number) {
  const before = await h.treeSize();
  const answer = await deliver(h, source, body);
  expect(answer.status, JSON.stringify(answer.body).slice(0, 500)).toBe(status);
  expect(await h.treeSize()).toBe(before);
  return answer.body.error as { code: string; details: any };
}

describe("delivery forms and hashing as received", () => {
  it("hashes a single object over its exact bytes, whitespace and key order included", async () => {
    const text = ' {"tool":"a/b", "schema":"bursar.gateway-decision/1","event_id":"evt_obj","occurred_at":"2026-10-09T14:03:11Z","decision":"deny","args_hash":"' + "0".repeat(64) + '"} ';
    await stores(text, 1);
    const entry = await entryFor("evt_obj");
    expect(entry.body_sha256).toBe(sha256Hex(text.trim()));
    expect(entry.occurred_at).toBe("2026-10-09T14:03:11Z");
    expect(entry.source).toBe(source.id);
  });

  it("hashes each NDJSON line over its bytes, with LF, CRLF, blank lines and a trailing newline", async () => {
    const lines = [record("evt_nd_1"), record("evt_nd_2"), record("evt_nd_3")].map((value) => JSON.stringify(value, null, 0).replace(':"deny"', ': "deny"'));
    await stores(`${lines[0]}\r\n\r\n${lines[1]}\r\n${lines[2]}\n`, 3);
    for (const [i, line] of lines.entries()) expect((await entryFor(`evt_nd_${i + 1}`)).body_sha256).toBe(sha256Hex(line));
    await stores(ndjson([record("evt_nd_lf")]), 1);
    await stores(ndjson([record("evt_nd_nonl")]).trimEnd(), 1);
  });

  it("hashes array elements over their RFC 8785 canonical JSON", async () => {
    const elements = [record("evt_arr_1", { tool: "z" }), record("evt_arr_2")];
    await stores(JSON.stringify(elements, null, 2), 2);
    expect((await entryFor("evt_arr_1")).body_sha256).toBe(sha256Hex(canonicalJson(elements[0])));
  });

  it("answers 400 empty_delivery for a delivery holding no record: an empty body, blank lines, an empty array", async () => {
    for (const body of ["", " \r\n\n\t", "[]", " [ ]\n"]) expect((await refused(body, 400)).code, JSON.stringify(body)).toBe("empty_delivery");
  });

  it("reads the body whatever its Content-Type says: none, any media type, or a header that names none", async () => {
    const post = (content_type: string | undefined, body: Buffer) =>
      new Promise<number>((resolve, reject) => {
        const headers: Record<string, string> = { "bursar-signature": signatureHeader([source.signing_key], body, h.clock()), "content-length": String(body.length) };
        if (content_type !== undefined) headers["content-type"] = content_type;
        const sent = request(`${h.url}/ingest/${source.id}`, { method: "POST", headers }, (answer) => {
          answer.resume();
          resolve(answer.statusCode ?? 0);
        });
        sent.on("error", reject);
        sent.end(body);
      });
    for (const [n, content_type] of [undefined, "", ";;;", "a/b c", "text/plain", "application/octet-stream"].entries()) {
      expect(await post(content_type, Buffer.from(ndjson([record(`evt_ct_${n}`)]))), JSON.stringify(content_type)).toBe(200);
    }
  });

  it("accepts interlok.gateway-decision/1 records unchanged", async () => {
    await stores(ndjson([record("evt_interlok", { schema: "interlok.gateway-decision/1" })]), 1);
  });
});

describe("limits", () => {
  const many = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => record(`${prefix}_${i}`));

  it(`takes ${records_per_delivery_max} records in one delivery and refuses ${records_per_delivery_max + 1} with 413`, async () => {
    await stores(ndjson(many("evt_500", records_per_delivery_max)), records_per_delivery_max);
    const error = await refused(ndjson(many("evt_501", records_per_delivery_max + 1)), 413);
    expect(error.code).toBe("too_many_records");
    expect((await refused(JSON.stringify(many("evt_501a", records_per_delivery_max + 1)), 413)).code).toBe("too_many_records");
  });

  it(`reads a body of exactly ${delivery_bytes_max} bytes and refuses one byte more with 413 before parsing`, async () => {
    const line = ndjson([record("evt_2mb", { reason: "" })]);
    const padding = delivery_bytes_max - Buffer.byteLength(line);
    const exact = line.replace('"reason":""', `"reason":"${"r".repeat(0)}"`) + " ".repeat(padding);
    expect(Buffer.byteLength(exact)).toBe(delivery_bytes_max);
    await stores(exact, 1);
    const over = Buffer.alloc(delivery_bytes_max + 1, 0x7b); // "{{{{…": not JSON, so only a size check can answer 413
    expect((await refused(over, 413)).code).toBe("body_too_large");
  });
});

describe("bytes that are not UTF-8, and records too large to record", () => {
  const bytes = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((part) => (typeof part === "string" ? Buffer.from(part) : Buffer.from(part))));

  it("refuses invalid UTF-8 with 400 malformed naming its first bad byte, in every form, instead of storing U+FFFD for it", async () => {
    // 1.5 MB of 0xff inside a string: decoded leniently each byte became 3 bytes of U+FFFD, the
    // entry outgrew its limit and the answer was a 500.
    const [pre, post] = JSON.stringify(record("evt_utf8_big", { args: { blob: "X" } })).split('"X"');
    const big = bytes(`${pre}"`, Array.from({ length: 1_500_000 }, () => 0xff), `"${post}`);
    expect(big.length).toBeLessThan(delivery_bytes_max);
    const error = await refused(big, 400);
    expect(error.code).toBe("malformed");
    expect(error.details).toEqual({ offset: pre!.length + 1 });
    const line = ndjson([record("evt_utf8_ok")]);
    const cases: Array<[Buffer, number]> = [
      [bytes(line, '{"a":"', [0xed, 0xa0, 0x80], '"}\n'), line.length + 6], // a surrogate encoded as UTF-8
      [bytes(line, '{"a":"', [0xc0, 0xaf], '"}'), line.length + 6], // overlong "/"
      [bytes('[{"a":"', [0xe2, 0x82]), 7], // cut short at the end
      [bytes('{"reason":"', [0xf4, 0x90, 0x80, 0x80], '"}'), 11], // past U+10FFFF
    ];
    for (const [body, offset] of cases) {
      const refusal = await refused(body, 400);
      expect(refusal.code).toBe("malformed");
      expect(refusal.details.offset).toBe(offset);
    }
  });

  it("stores well-formed UTF-8 (2, 3 and 4 byte characters) and hashes its bytes as received", async () => {
    const text = JSON.stringify(record("evt_utf8_wide", { reason: "é ₹ 日本 😀" }));
    await stores(text, 1);
    const entry = await entryFor("evt_utf8_wide");
    expect(entry.body_sha256).toBe(sha256Hex(Buffer.from(text)));
    expect((entry.body.record as { reason: string }).reason).toBe("é ₹ 日本 😀");
  });

  it(`refuses with 422 a record whose evidence entry would exceed ${entry_bytes_max} bytes, though its delivery is under 2 MiB`, async () => {
    // RFC 8785 writes 9e20 as 900000000000000000000: five bytes sent, twenty-one recorded.
    const numbers = JSON.stringify(record("evt_entry_big", { args: { n: "N" } })).replace('"N"', `[${Array(400_000).fill("9e20").join(",")}]`);
    const body = `${JSON.stringify(record("evt_entry_small"))}\n${numbers}\n`;
    expect(Buffer.byteLength(body)).toBeLessThan(delivery_bytes_max);
    const error = await refused(body, 422);
    expect(error.code).toBe("invalid_records");
    expect(error.details.problems).toEqual([{ index: 1, field: "(record)", message: expect.stringContaining(`at most ${entry_bytes_max} bytes`) }]);
  });
});

describe("validation is all or nothing", () => {
  it("names an unknown field at the top level and nested (agent.idd), and stores nothing", async () => {
    const body = ndjson([record("evt_ok_1"), record("evt_bad_1", { extra: 1 }), record("evt_bad_2", { agent: { idd: "x", type: "agent" } })]);
    const error = await refused(body, 422);
    expect(error.code).toBe("invalid_records");
    expect(error.details.problems).toEqual(
      expect.arrayContaining([
        { index: 1, field: "extra", message: "unknown field" },
        { index: 2, field: "agent.idd", message: "unknown field" },
      ]),
    );
    expect(error.details.invalid_records).toBe(2);
  });

  it("answers 422 for a record with 180,000 unknown fields (listing 1,000), not a 500", async () => {
    const extra = Object.fromEntries(Array.from({ length: 180_000 }, (_, i) => [`k${i}`, 0]));
    const error = await refused(ndjson([{ ...record("evt_many_unknown"), ...extra }]), 422);
    expect(error.code).toBe("invalid_records");
    expect(error.details.problems).toHaveLength(1_000);
  });

  it("refuses an event_id with control characters, naming the field (PostgreSQL text cannot hold NUL)", async () => {
    const error = await refused(ndjson([record("evt_ctl\u0000nul"), record("evt_ctl_ok")]), 422);
    expect(error.details.problems).toEqual([{ index: 0, field: "event_id", message: expect.stringContaining("control characters") }]);
    // Nor a C1 control, a line separator, a bidirectional override or a byte order mark: each makes the id read as another.
    // Nor a tag character or another format control past U+FFFF, a Hangul filler or the Braille blank (from a hostile review).
    const shown = ["evt_c1\u0085", "evt_ls\u2028x", "evt_rlo\u202ecba", "\ufeffevt_bom", "evt_lrm\u200e", "evt_alm\u061c", "evt_zw\u200bj", "evt_wj\u2060"];
    shown.push("evt_1\u{E0041}", "evt_\u{1D173}x", "evt_\u3164", "evt_\u2800", "evt_vs\ufe0f");
    const problems = (await refused(ndjson(shown.map((id) => record(id))), 422)).details.problems as Array<{ index: number; field: string }>;
    expect(problems.map(({ index, field }) => [index, field])).toEqual(shown.map((_, index) => [index, "event_id"]));
  });

  it("refuses a key that occurs twice in one object, in every form, naming its path", async () => {
    // JSON.parse keeps the last "decision" (allow); the hashed bytes say deny too.
    const twice = JSON.stringify(record("evt_dup_1", { decision: "deny" })).replace('"decision":"deny"', '"decision":"deny","decision":"allow"');
    const object = await refused(twice, 422);
    expect(object.details.problems).toEqual([{ index: 0, field: "decision", message: expect.stringContaining("occurs twice") }]);
    const nested = JSON.stringify(record("evt_dup_2", { args: { items: [{ sku: "a", qty: 1 }] } })).replace('"sku":"a"', '"sku":"a","\\u0073ku":"b"');
    const lines = await refused(ndjson([record("evt_dup_ok")]) + nested + "\n", 422);
    expect(lines.details.problems).toEqual([{ index: 1, field: "args.items.0.sku", message: expect.stringContaining("occurs twice") }]);
    const array = await refused(`[${JSON.stringify(record("evt_dup_3"))},${twice.replace("evt_dup_1", "evt_dup_4")}]`, 422);
    expect(array.details.problems).toEqual([{ index: 1, field: "decision", message: expect.stringContaining("occurs twice") }]);
  });

  it("lists a record's key given twice and its number read as another beside its other problems, not instead of them", async () => {
    const text = JSON.stringify(record("evt_all_1", { agent: { id: "agent-release-bot", type: "agent", idd: "x" }, args: { order_id: 0 } }))
      .replace('"decision":"allow"', '"decision":"allow","decision":"deny"')
      .replace('"order_id":0', '"order_id":12345678901234567891');
    const problems = (await refused(text, 422)).details.problems as Array<{ field: string; message: string }>;
    expect(problems.map(({ field, message }) => [field, message.includes("twice") ? "twice" : message.includes("as a string") ? "inexact" : message])).toEqual([
      ["decision", "twice"],
      ["args.order_id", "inexact"],
      ["agent.idd", "unknown field"],
    ]);
  });

  it("refuses a number JSON parsers do not keep as sent, in every form, naming its path: no other record passes for a retry", async () => {
    // JSON.parse reads both as 1234567890123456800: as array elements they hashed alike, and the
    // second, a different decision under the same event_id, was answered as a retry.
    const sent = (order_id: string) => JSON.stringify(record("evt_big_1", { decision: "deny", args: { order_id: 0 } })).replace('"order_id":0', `"order_id":${order_id}`);
    for (const body of [sent("1234567890123456789"), `[${sent("1234567890123456700")}]`, `${sent("12345678901234567891")}\n`]) {
      const error = await refused(body, 422);
      expect(error.details.problems).toEqual([{ index: 0, field: "args.order_id", message: expect.stringContaining("send it as a string") }]);
    }
    const inArray = JSON.stringify(record("evt_big_2", { args: { list: [1, 2, 0] } })).replace("[1,2,0]", "[1,2,1e-400]");
    expect((await refused(`[${JSON.stringify(record("evt_big_3"))},${inArray}]`, 422)).details.problems).toEqual([
      { index: 1, field: "args.list.2", message: expect.stringContaining("reads as 0") },
    ]);
    // Numbers a double keeps as sent, however spelled, are stored: 2^53 - 1, 0.1, 1E21, 1.50, -0.
    await stores(JSON.stringify(record("evt_big_ok", { args: { n: 0 } })).replace('"n":0', '"n":[9007199254740991,0.1,1E21,1.50,-0,12345678901234567e4]'), 1);
  });

  it("refuses args and args_hash together, and neither", async () => {
    const both = record("evt_both", { args_hash: "a".repeat(64) });
    const { args: _args, ...neither } = record("evt_neither");
    const error = await refused(ndjson([both, neither]), 422);
    expect(error.details.problems.map((p: { index: number }) => p.index).sort()).toEqual([0, 1]);
    expect(error.details.problems.every((p: { message: string }) => p.message.includes("exactly one of args or args_hash"))).toBe(true);
  });

  it("names an upper-case args_hash once: the key as an unknown field, the value as not lower-case hex, and not a missing args too", async () => {
    const { args: _args, ...base } = record("evt_upper_hash");
    const digest = "abcdef0123456789".repeat(4);
    for (const key of ["ARGS_HASH", "Args_Hash", "ARGS"]) {
      const keyed = { ...base, [key]: digest };
      for (const body of [JSON.stringify(keyed), ndjson([keyed]), JSON.stringify([keyed])]) {
        expect((await refused(body, 422)).details.problems).toEqual([{ index: 0, field: key, message: "unknown field" }]);
      }
    }
    const valued = { ...base, args_hash: digest.toUpperCase() };
    expect((await refused(ndjson([valued]), 422)).details.problems).toEqual([{ index: 0, field: "args_hash", message: expect.stringContaining("lower-case hex") }]);
    // Another unknown key leaves the missing args named: it is no spelling of either.
    expect((await refused(ndjson([{ ...base, argz: digest }]), 422)).details.problems).toEqual([
      { index: 0, field: "argz", message: "unknown field" },
      { index: 0, field: "args", message: "exactly one of args or args_hash is required" },
    ]);
  });

  it("lists every bad record by index, including lines that are not JSON", async () => {
    const body = `${JSON.stringify(record("evt_v1"))}\n{not json\n${JSON.stringify(record("evt_v2", { decision: "maybe", occurred_at: "yesterday" }))}\n`;
    const error = await refused(body, 422);
    const fields = error.details.problems.map((p: { index: number; field: string }) => `${p.index}:${p.field}`);
    expect(fields).toEqual(expect.arrayContaining(["1:(record)", "2:decision", "2:occurred_at"]));
  });

  it("refuses a lone surrogate anywhere in a record with 422 naming its field, in every delivery form", async () => {
    // JSON.parse keeps "\ud800" as a lone surrogate, which UTF-8 (so RFC 8785 and the log) cannot carry.
    const lone = (value: Record<string, unknown>, text: string) => JSON.stringify(value).replace('"LONE"', `"${text}"`);
    const single = lone(record("evt_ls_obj", { reason: "LONE" }), "\\ud800");
    expect((await refused(single, 422)).details.problems).toEqual([{ index: 0, field: "reason", message: expect.stringContaining("lone surrogate") }]);
    const lines = [
      JSON.stringify(record("evt_ls_ok")),
      lone(record("evt_ls_tool", { tool: "LONE" }), "\\udc00"),
      lone(record("LONE"), "x\\ud800"),
      lone(record("evt_ls_agent", { agent: { id: "LONE", type: "agent" } }), "\\udbff"),
    ];
    const error = await refused(`${lines.join("\n")}\n`, 422);
    expect(error.details.problems).toEqual([
      { index: 1, field: "tool", message: expect.stringContaining("lone surrogate") },
      { index: 2, field: "event_id", message: expect.stringContaining("lone surrogate") },
      { index: 3, field: "agent.id", message: expect.stringContaining("lone surrogate") },
    ]);
    const array = `[${lone(record("evt_ls_arr", { reason: "LONE" }), "\\ud800")}]`;
    expect((await refused(array, 422)).details.problems).toEqual([{ index: 0, field: "reason", message: expect.stringContaining("lone surrogate") }]);
  });

  it("names the place inside args that canonical JSON cannot write: a lone surrogate in a key or value, a number out of range", async () => {
    const args = '{"list":[1,"\\ud800"],"nested":{"\\udc00x":true},"n":1e400}';
    const line = JSON.stringify(record("evt_args_bad", { args: "ARGS" })).replace('"ARGS"', args);
    for (const body of [line, `[${line}]`]) {
      const problems = (await refused(body, 422)).details.problems as Array<{ field: string; message: string }>;
      expect(problems.map((p) => p.field).sort()).toEqual(["args.list.1", "args.n", "args.nested.\udc00x"]);
      expect(problems.find((p) => p.field === "args.n")!.message).toContain("out of range");
      expect(problems.filter((p) => p.message.includes("lone surrogate"))).toHaveLength(2);
    }
    const deep = JSON.stringify(record("evt_args_deep", { args: { deep: "DEEP" } })).replace('"DEEP"', `${"[".repeat(300)}${"]".repeat(300)}`);
    const [problem] = (await refused(deep, 422)).details.problems as Array<{ field: string; message: string }>;
    expect(problem!.message).toBe("is nested deeper than 256 levels");
    // The path is shown up to its first 16 segments.
    expect(problem!.field).toMatch(/^args\.deep(\.0){14}\.…$/);
  });

  it("names a huge key by a shortened path: a 7 KB line of a thousand 1e400s under a 2,000-character key answers in under 250 KB", async () => {
    const key = "k".repeat(2_000);
    const line = JSON.stringify(record("evt_args_huge_key", { args: "ARGS" })).replace('"ARGS"', `{"${key}":[${Array(1_000).fill("1e400").join(",")}]}`);
    const answer = await deliver(h, source, line);
    expect(answer.status).toBe(422);
    // Each problem used to repeat the whole key: over 2 MB for this line.
    expect(JSON.stringify(answer.body).length).toBeLessThan(250_000);
    const problems = answer.body.error.details.problems as Array<{ field: string; message: string }>;
    expect(problems).toHaveLength(1_000);
    expect(problems[0]).toEqual({ index: 0, field: `args.${"k".repeat(64)}….0`, message: expect.stringContaining("out of range") });
    const twice = JSON.stringify(record("evt_dup_huge", { args: { [key]: { a: 1 } } })).replace('"a":1', '"a":1,"a":2');
    expect((await refused(twice, 422)).details.problems).toEqual([
      { index: 0, field: `args.${"k".repeat(64)}….a`, message: expect.stringContaining("occurs twice") },
    ]);
  });

  it("allows any shape inside args (free-form) but not outside", async () => {
    await stores(ndjson([record("evt_args_free", { args: { nested: { anything: [1, { goes: true }] }, idd: 1 } })]), 1);
  });
});

describe("idempotency per (source, event_id)", () => {
  it("returns the first receipt for the same bytes and writes one log entry", async () => {
    const body = ndjson([record("evt_dup_1"), record("evt_dup_2")]);
    const first = await stores(body, 2);
    const before = await h.treeSize();
    const again = await deliver(h, source, body);
    expect(again.status).toBe(200);
    expect(again.body.written).toBe(0);
    expect(again.body.duplicates).toBe(2);
    expect(again.body.receipt).toEqual(first.receipt);
    expect(await h.treeSize()).toBe(before);
  });

  it("returns the first receipt byte for byte, whether it listed only its own records or also repeats and earlier ones", async () => {
    const verifier = parseVerifierKey(h.bursar.log.verifierKey);
    const earlier = record("evt_bytes_earlier");
    await stores(ndjson([earlier]), 1);
    const own = ndjson([record("evt_bytes_1"), record("evt_bytes_2"), record("evt_bytes_3")]);
    const repeated = ndjson([record("evt_bytes_4"), record("evt_bytes_5"), record("evt_bytes_4")]);
    for (const body of [own, repeated]) {
      const first = await deliver(h, source, body);
      h.clock.advance(1_000); // a receipt signed anew would say so in received_at
      const again = await deliver(h, source, body);
      expect(again.body.written).toBe(0);
      expect(JSON.stringify(again.body.receipt)).toBe(JSON.stringify(first.body.receipt));
      expect(verifyDeliveryReceipt(again.body.receipt as DeliveryReceipt, verifier)).toEqual({ ok: true });
    }
    // A delivery that also listed a record an earlier delivery wrote: its retry names two
    // deliveries' records, and still gets its own first receipt back.
    const mixed = ndjson([earlier, record("evt_bytes_6")]);
    const first = await deliver(h, source, mixed);
    h.clock.advance(1_000);
    const again = await deliver(h, source, mixed);
    expect(again.body.written).toBe(0);
    expect(JSON.stringify(again.body.receipt)).toBe(JSON.stringify(first.body.receipt));
    // The earlier record alone is its own first delivery's retry, not the mixed one's.
    const alone = await deliver(h, source, ndjson([earlier]));
    expect((alone.body.receipt.records as Array<{ event_id: string }>).map((r) => r.event_id)).toEqual(["evt_bytes_earlier"]);
    expect(verifyDeliveryReceipt(alone.body.receipt as DeliveryReceipt, verifier)).toEqual({ ok: true });
  });

  it("signs v2 receipts naming the log, and returns a receipt stored before that (v1, no log) unchanged on a retry", async () => {
    const verifier = parseVerifierKey(h.bursar.log.verifierKey);
    const earlier = record("evt_v1_earlier");
    await stores(ndjson([earlier]), 1);
    // Stored without its listing (every record its own) and stored whole (one written earlier).
    for (const records of [[record("evt_v1_own_1"), record("evt_v1_own_2")], [earlier, record("evt_v1_mixed")]]) {
      const body = ndjson(records);
      const first = await deliver(h, source, body);
      expect(first.body.receipt.log).toBe(h.bursar.log.logId);
      expect(verifyDeliveryReceipt(first.body.receipt as DeliveryReceipt, verifier)).toEqual({ ok: true });
      // As an earlier Bursar stored it: no log, a v1 signature.
      const row = await h.bursar.driver.read((tx) => tx.get<{ receipt_json: string }>("SELECT receipt_json FROM ingest_deliveries WHERE delivery_id = ?", [first.body.delivery_id]));
      const { log: _log, ...stored } = JSON.parse(row!.receipt_json) as Record<string, unknown>;
      stored.signature = "djEgc2lnbmF0dXJl";
      await h.bursar.driver.transaction((tx) => tx.run("UPDATE ingest_deliveries SET receipt_json = ? WHERE delivery_id = ?", [JSON.stringify(stored), first.body.delivery_id]));
      h.clock.advance(1_000);
      const again = await deliver(h, source, body);
      expect(again.body.written).toBe(0);
      const { log: _firstLog, ...v1 } = first.body.receipt as Record<string, unknown>;
      expect(JSON.stringify(again.body.receipt)).toBe(JSON.stringify({ ...v1, signature: "djEgc2lnbmF0dXJl" }));
    }
  });

  it("signs a new listing for a retry that reorders or leaves out records of one delivery", async () => {
    const verifier = parseVerifierKey(h.bursar.log.verifierKey);
    const a = record("evt_regroup_a");
    const b = record("evt_regroup_b");
    const c = record("evt_regroup_c");
    const first = await deliver(h, source, ndjson([a, b, c]));
    for (const regrouped of [[b, a, c], [a, c], [a, a, b]]) {
      const again = await deliver(h, source, ndjson(regrouped));
      expect(again.body.written).toBe(0);
      const listed = again.body.receipt.records as Array<{ event_id: string; seq: number }>;
      expect(listed.map((r) => r.event_id)).toEqual(regrouped.map((r) => r.event_id));
      const seqOf = new Map((first.body.receipt.records as Array<{ event_id: string; seq: number }>).map((r) => [r.event_id, r.seq]));
      expect(listed.every((r) => seqOf.get(r.event_id) === r.seq)).toBe(true);
      expect(again.body.receipt.signature).not.toBe(first.body.receipt.signature);
      expect(verifyDeliveryReceipt(again.body.receipt as DeliveryReceipt, verifier)).toEqual({ ok: true });
    }
  });

  it("answers 409 event_id_conflict for the same event_id with different bytes, storing nothing", async () => {
    await stores(ndjson([record("evt_conflict")]), 1);
    const error = await refused(ndjson([record("evt_new_beside"), record("evt_conflict", { decision: "deny" })]), 409);
    expect(error.code).toBe("event_id_conflict");
    expect(error.details.records).toEqual([{ index: 1, event_id: "evt_conflict" }]);
  });

  it("writes only the new records of a delivery that mixes retries and new ones, listing all", async () => {
    const old = record("evt_mix_old");
    await stores(ndjson([old]), 1);
    const answer = await deliver(h, source, ndjson([old, record("evt_mix_new")]));
    expect(answer.body.written).toBe(1);
    expect(answer.body.receipt.records.map((r: { event_id: string }) => r.event_id)).toEqual(["evt_mix_old", "evt_mix_new"]);
  });
});

describe("approval verification and scrubbing", () => {
  const approve = (event_id: string, approver: Record<string, unknown>) =>
    record(event_id, { decision: "approve", agent: { id: "agent-release-bot", email: "bot@acme.com", type: "agent" }, approver });

  it("marks an approve verified only for a human approver who is not the agent, and the record names the agent", async () => {
    await stores(
      ndjson([
        approve("evt_ap_human", { email: "lead@acme.com", type: "human" }),
        approve("evt_ap_self", { id: "agent-release-bot", type: "human" }),
        approve("evt_ap_self_mail", { email: "BOT@acme.com", type: "human" }),
        approve("evt_ap_agent", { id: "other-bot", type: "agent" }),
        approve("evt_ap_noname", { name: "Someone", type: "human" }),
        record("evt_ap_allow"),
        record("evt_ap_no_agent", { decision: "approve", agent: { name: "Release bot", type: "agent" }, approver: { email: "lead@acme.com", type: "human" } }),
      ]),
      7,
    );
    expect((await entryFor("evt_ap_human")).body.approval_verified).toBe(true);
    expect((await entryFor("evt_ap_self")).body.approval_verified).toBe(false);
    expect((await entryFor("evt_ap_self_mail")).body.approval_verified).toBe(false);
    expect((await entryFor("evt_ap_agent")).body.approval_verified).toBe(false);
    expect((await entryFor("evt_ap_noname")).body.approval_verified).toBe(false);
    expect((await entryFor("evt_ap_allow")).body.approval_verified).toBeUndefined();
    // No agent id or email to compare the approver with: nothing shows the approver is someone else.
    expect((await entryFor("evt_ap_no_agent")).body.approval_verified).toBe(false);
  });

  it("scrubs secrets in args while args_hash and body_sha256 still bind the original", async () => {
    const args = {
      card: "4111 1111 1111 1111",
      cvv: "123",
      password: "hunter2",
      auth_header: "Bearer abcdefghijklmnop",
      payment: "4111 1111 1111 1111 123", // a card number with its CVV: one run that fails Luhn as a whole
      amex: "378282246310005 1234",
      note: "ok",
    };
    const line = JSON.stringify(record("evt_secret", { args }));
    await stores(`${line}\n`, 1);
    const entry = await entryFor("evt_secret");
    const stored = (entry.body.record as { args: Record<string, unknown> }).args;
    expect(stored).toEqual({ card: "[redacted]", cvv: "[redacted]", password: "[redacted]", auth_header: "[redacted]", payment: "[redacted]", amex: "[redacted]", note: "ok" });
    expect(entry.body.args_hash).toBe(canonicalSha256Hex(args));
    expect(entry.body_sha256).toBe(sha256Hex(line));
    const raw = JSON.stringify(await h.entries());
    for (const secret of ["4111 1111 1111 1111", "hunter2", "abcdefghijklmnop", "378282246310005"]) expect(raw).not.toContain(secret);
  });
});

describe("hashes are not card numbers", () => {
  // A Luhn-valid run of digits inside a hex digest is bounded by hex letters, not by
  // separators, so scrub() does not take it for a card number.
  it("keeps an args_hash whose hex digits contain a Luhn-valid run", async () => {
    const digest = "e8f80ce73a7bf62bf87219a985f86002ca8284352066799136ec02afef18ce0b";
    await stores(ndjson([record("evt_digest", { args: undefined, args_hash: digest })]), 1);
    expect((await entryFor("evt_digest")).body.args_hash).toBe(digest);
  });
});

describe("other routes into the same path", () => {
  it("takes an API push with the source's API key and refuses other tokens", async () => {
    const post = (token: string, body: string) =>
      fetch(`${h.url}/api/v1/evidence-sources/${source.id}/events`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body });
    expect((await post(source.api_key, ndjson([record("evt_push")]))).status).toBe(200);
    expect((await post("bsr_srckey_wrong", ndjson([record("evt_push_2")]))).status).toBe(401);
    expect((await fetch(`${h.url}/api/v1/evidence-sources/${source.id}/events`, { method: "POST", body: "{}" })).status).toBe(401);
  });

  it("takes a .jsonl upload with the operator token only", async () => {
    const upload = (token: string) =>
      fetch(`${h.url}/api/v1/evidence-sources/${source.id}/upload`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/jsonl" }, body: ndjson([record("evt_upload")]) });
    expect((await upload(source.api_key)).status).toBe(401);
    const response = await upload("ingest-operator-token-0123456789");
    expect(response.status).toBe(200);
    expect(((await response.json()) as { written: number }).written).toBe(1);
  });

  it("publishes the schema as JSON Schema with strict objects and the args rule", async () => {
    const response = await fetch(`${h.url}/schemas/gateway-decision-1.json`);
    expect(response.status).toBe(200);
    const schema = (await response.json()) as Record<string, any>;
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.agent.additionalProperties).toBe(false);
    expect(schema.properties.args.type).toBe("object");
    expect(schema.properties.schema.enum).toEqual(["bursar.gateway-decision/1", "interlok.gateway-decision/1"]);
    expect(schema.oneOf).toEqual([{ required: ["args"] }, { required: ["args_hash"] }]);
    expect(schema.required).toEqual(expect.arrayContaining(["schema", "event_id", "occurred_at", "decision", "tool"]));
  });

  it("publishes an occurred_at pattern that the server agrees with: 9 fraction digits are taken and 10 refused by both", async () => {
    const response = await fetch(`${h.url}/schemas/gateway-decision-1.json`);
    const pattern = new RegExp(((await response.json()) as Record<string, any>).properties.occurred_at.pattern, "u");
    const nine = "2026-10-09T14:03:11.123456789Z";
    const ten = "2026-10-09T14:03:11.1234567891Z";
    expect([pattern.test(nine), pattern.test(ten)]).toEqual([true, false]);
    const times = [
      nine,
      ten,
      "2026-10-09T14:03:11Z",
      "2026-10-09T14:03:11.5+05:30",
      "2026-10-09T14:03:11-00:00",
      "2024-02-29T00:00:00Z",
      "2026-10-09t14:03:11z",
      "2026-10-09 14:03:11Z",
      "2026-10-09T14:03:60Z",
      "2026-10-09T14:03Z",
      "2026-10-09T14:03:11.Z",
      "2026-10-09T14:03:11+0530",
      "2026-10-09T14:03:11+24:00",
      "2026-02-29T00:00:00Z",
    ];
    // One delivery of every time: the 422 names each record the server refuses, and stores none.
    const error = await refused(ndjson(times.map((occurred_at, i) => record(`evt_time_${i}`, { occurred_at }))), 422);
    const problems = error.details.problems as Array<{ index: number; field: string }>;
    expect(problems.every((problem) => problem.field === "occurred_at")).toBe(true);
    // A time can fail both the date-time format and the fraction check: two problems, one record.
    const server_refuses = [...new Set(problems.map((problem) => times[problem.index]))];
    expect(server_refuses).toContain(ten);
    expect(server_refuses).not.toContain(nine);
    expect(server_refuses).toEqual(times.filter((time) => !pattern.test(time)));
  });
});
