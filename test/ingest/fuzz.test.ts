// Random bodies and headers to the ingestion routes never produce a 5xx or a partial store:
// after a 200 every event_id the body held is in the database, each with its log entry, and
// anything else adds nothing, judged by reading the database rather than the answer. Bodies
// include records with lone surrogates in any field and deliveries with bytes that are not UTF-8.

import { isUtf8 } from "node:buffer";
import { request } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureHeader } from "../../src/ingest/signature.js";
import { decisionsSource, harness, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h);
});
afterAll(async () => h.close());

function post(path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  const url = new URL(path, h.url);
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: "POST", headers: { ...headers, "content-length": String(body.length) } }, (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }));
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

const token = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
const header_value = fc.string({ maxLength: 80 }).map((value) => value.replace(/[^\x20-\x7e]/g, ""));
/** One UTF-16 code unit of the surrogate range: alone it has no UTF-8 form (JSON.stringify writes it as \udXXX). */
const lone_surrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));
const text = fc.string({ unit: fc.oneof({ weight: 3, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) }, lone_surrogate), maxLength: 10 });
/** A valid record but for one field (or an args key or value) of text that may hold lone surrogates. */
const odd_record = fc.tuple(fc.uuid(), fc.constantFrom("reason", "tool", "event_id", "agent", "args", "args key"), text).map(([id, where, value]) => {
  if (where === "agent") return record(`evt_${id}`, { agent: { id: value, type: "agent" } });
  if (where === "args") return record(`evt_${id}`, { args: { nested: [value] } });
  if (where === "args key") return record(`evt_${id}`, { args: { [value]: 1 } });
  return record(`evt_${id}`, { [where]: value });
});
const record_like = fc.oneof(
  fc.constant(record("x")),
  fc.record({ schema: fc.constantFrom("bursar.gateway-decision/1", "nope"), event_id: fc.string({ maxLength: 20 }), decision: fc.string({ maxLength: 8 }), tool: fc.string({ maxLength: 8 }) }),
  fc.jsonValue({ maxDepth: 3 }),
  odd_record,
);
/** Several records that mostly pass, now and then one that does not: where a partial store would show. */
const several = fc.array(fc.oneof({ weight: 3, arbitrary: fc.uuid().map((id) => record(`evt_${id}`)) }, odd_record, fc.constant(record("x"))), { minLength: 2, maxLength: 4 });
const json_body = fc.oneof(
  several.map((records) => Buffer.from(JSON.stringify(records))),
  several.map((records) => Buffer.from(records.map((value) => JSON.stringify(value)).join("\n"))),
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(JSON.stringify(records))),
  fc.array(record_like, { maxLength: 4 }).map((records) => Buffer.from(records.map((value) => JSON.stringify(value)).join("\r\n"))),
  fc.tuple(fc.uuid(), fc.constantFrom("allow", "deny", "approve"), fc.jsonValue({ maxDepth: 2 })).map(([id, decision, args]) =>
    Buffer.from(JSON.stringify(record(`evt_${id}`, { decision, args: typeof args === "object" && args !== null && !Array.isArray(args) ? args : { value: args } }))),
  ),
  odd_record.map((value) => Buffer.from(JSON.stringify(value))),
);
/** Bytes that are not UTF-8: a stray continuation, an overlong, an encoded surrogate, past U+10FFFF, cut short, never used; or any. */
const bad_utf8 = fc.oneof(
  fc.constantFrom([0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xff], [0xfe]),
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((bytes) => [...bytes]),
);
/** A body as sent, and the JSON it was made from (bad bytes put into it can cut an event_id apart). */
const body = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ bytes: Buffer.from(bytes), origin: Buffer.from(bytes) })),
  json_body.map((bytes) => ({ bytes, origin: bytes })),
  // A delivery that would be valid JSON, with bytes that are not UTF-8 put in anywhere.
  fc.tuple(json_body, bad_utf8, fc.nat()).map(([bytes, bad, at]) => {
    const cut = at % (bytes.length + 1);
    return { bytes: Buffer.concat([bytes.subarray(0, cut), Buffer.from(bad), bytes.subarray(cut)]), origin: bytes };
  }),
);

function parsed(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * The event_ids a body names, read apart from src's splitter so a splitter that drops a record
 * cannot hide it: the whole text as one JSON value (a record, or an array of them), else each
 * line as one. Parts that are not JSON name none; for a refused body this is a best guess, which
 * is all "none of them was stored" needs.
 */
function sentEventIds(bytes: Buffer): string[] {
  const ids = new Set<string>();
  const take = (value: unknown) => {
    if (typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { event_id?: unknown }).event_id === "string") {
      ids.add((value as { event_id: string }).event_id);
    }
  };
  const text = bytes.toString("utf8");
  const whole = parsed(text);
  if (whole) (Array.isArray(whole.value) ? whole.value : [whole.value]).forEach(take);
  else for (const line of text.split(/\r?\n/)) take(parsed(line)?.value);
  return [...ids];
}

interface StoredRecord {
  event_id: string;
  seq: number;
  sha256: string;
  /** The log entry at `seq`, when there is one. */
  entry?: { kind: string; source: string; body_sha256: string; event_id: unknown };
}

/** What the database holds for these event_ids of the source: its ingest_records rows and the log entry each points to. */
async function stored(event_ids: readonly string[]): Promise<Map<string, StoredRecord>> {
  if (event_ids.length === 0) return new Map();
  return h.bursar.driver.read(async (tx) => {
    const rows = await tx.all<{ event_id: string; seq: number | string; sha256: string; kind: string | null; source: string | null; entry_text: string | null }>(
      `SELECT r.event_id, r.seq, r.sha256, e.kind, e.source, e.entry_text FROM ingest_records r LEFT JOIN log_entries e ON e.seq = r.seq
        WHERE r.source_id = ? AND r.event_id IN (${event_ids.map(() => "?").join(", ")})`,
      [source.id, ...event_ids],
    );
    return new Map(
      rows.map((row) => {
        const entry = row.entry_text === null ? undefined : (JSON.parse(row.entry_text) as { body_sha256: string; body: { record?: { event_id?: unknown } } });
        const logged = entry && { kind: row.kind!, source: row.source!, body_sha256: entry.body_sha256, event_id: entry.body.record?.event_id };
        return [row.event_id, { event_id: row.event_id, seq: Number(row.seq), sha256: row.sha256, ...(logged ? { entry: logged } : {}) }];
      }),
    );
  });
}

const recordCount = () =>
  h.bursar.driver.read(async (tx) => Number((await tx.get<{ count: number | string }>("SELECT count(*) AS count FROM ingest_records WHERE source_id = ?", [source.id]))!.count));

describe("fuzzing the ingestion routes", () => {
  it("never answers 5xx and never stores part of a delivery", async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.dictionary(token, header_value, { maxKeys: 4 }), fc.constantFrom("signed", "unsigned", "garbled", "api", "upload"), async ({ bytes, origin }, extra, mode) => {
        const headers: Record<string, string> = { ...extra };
        delete headers["content-length"];
        delete headers["transfer-encoding"];
        delete headers.host;
        delete headers.expect;
        delete headers.connection;
        if (mode === "signed") headers["bursar-signature"] = signatureHeader([source.signing_key], bytes, h.clock());
        if (mode === "garbled") headers["bursar-signature"] = extra[Object.keys(extra)[0] ?? ""] ?? "t=1,v1=zz";
        if (mode === "api") headers.authorization = `Bearer ${source.api_key}`;
        if (mode === "upload") headers.authorization = "Bearer ingest-operator-token-0123456789";
        const path = mode === "api" ? `/api/v1/evidence-sources/${source.id}/events` : mode === "upload" ? `/api/v1/evidence-sources/${source.id}/upload` : `/ingest/${source.id}`;
        const event_ids = [...new Set([...sentEventIds(bytes), ...sentEventIds(origin)])];
        const before = await h.treeSize();
        const records_before = await recordCount();
        const stored_before = await stored(event_ids);
        const answer = await post(path, headers, bytes);
        expect(answer.status, answer.text).toBeLessThan(500);
        const stored_after = await stored(event_ids);
        if (answer.status !== 200) {
          // Refused: not one row or entry more, and the ids it named are as they were.
          expect(await h.treeSize()).toBe(before);
          expect(await recordCount()).toBe(records_before);
          expect(stored_after).toEqual(stored_before);
          return;
        }
        // Bytes that are not UTF-8 are never stored (they would be stored as U+FFFD, not as hashed).
        expect(isUtf8(bytes)).toBe(true);
        // Accepted: every event_id the body held is stored, each with its own ingest.decision
        // entry; ids received before keep their row; the log grew by the new ids, nothing else.
        const sent = sentEventIds(bytes);
        const fresh = sent.filter((event_id) => !stored_before.has(event_id));
        for (const event_id of sent) {
          const row = stored_after.get(event_id);
          expect(row, `${event_id} of an accepted delivery is not in ingest_records`).toBeDefined();
          expect(row!.entry, `${event_id}'s log entry ${row!.seq} is missing`).toMatchObject({ kind: "ingest.decision", source: source.id, body_sha256: row!.sha256 });
          // The stored record may have the id scrubbed when it looks like a credential, never another id.
          expect([event_id, "[redacted]"]).toContain(row!.entry!.event_id);
          if (stored_before.has(event_id)) expect(row).toEqual(stored_before.get(event_id));
          else expect(row!.seq).toBeGreaterThanOrEqual(before);
        }
        expect(await h.treeSize()).toBe(before + fresh.length);
        expect(await recordCount()).toBe(records_before + fresh.length);
        expect((JSON.parse(answer.text) as { written: number }).written).toBe(fresh.length);
      }),
      { numRuns: 300 },
    );
  });
});
