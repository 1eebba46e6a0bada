// A rotation sent with an Idempotency-Key and repeated after a lost answer answers as the first
// time and changes nothing: without the key the repeat is a second rotation, which ends the
// secrets the gateway still signs with (an earlier rotation's grace ends at the next one).

import { readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretSealer } from "../../src/sources/sealed.js";
import { rotation_replay_window_ms, SourceStore } from "../../src/sources/store.js";
import { decisionsSource, deliver, harness, ndjson, operator_token, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
beforeAll(async () => {
  h = await harness();
});
afterAll(async () => h.close());

interface Rotated extends DecisionsSource {
  previous_valid_until: string;
  replayed?: boolean;
}

async function rotate(source_id: string, body: unknown, key?: string | string[]): Promise<{ status: number; body: Rotated & { error?: { code: string; message: string } } }> {
  const response = await fetch(`${h.url}/api/v1/evidence-sources/${source_id}/rotate`, {
    method: "POST",
    headers: [
      ["authorization", `Bearer ${operator_token}`],
      ["content-type", "application/json"],
      ...(key === undefined ? [] : [key].flat().map((value): [string, string] => ["idempotency-key", value])),
    ],
    body: JSON.stringify(body),
  });
  return { status: response.status, body: JSON.parse(await response.text()) };
}

/** How many gate.operator entries of `action` the source has. */
const recorded = async (source_id: string, action: string) =>
  (await h.entries("gate.operator")).filter((stored) => stored.entry.body.action === action && stored.entry.body.source_id === source_id).length;
const rotations = (source_id: string) => recorded(source_id, "source.rotate");
const liveSecrets = async (source_id: string) => (await h.api<{ secrets: unknown[] }>("GET", `/api/v1/evidence-sources/${source_id}`)).body.secrets.length;

describe("rotating a source with an Idempotency-Key", () => {
  it("answers a repeat with the first answer, replayed, and leaves the gateway's key working", async () => {
    const source = await decisionsSource(h, "rotate-replay");
    const first = await rotate(source.id, { grace_seconds: 600 }, "rotate-2026-12-04");
    expect(first.status).toBe(200);
    expect(first.body.replayed).toBeUndefined();
    const secrets = await liveSecrets(source.id);
    const again = await rotate(source.id, { grace_seconds: 600 }, "rotate-2026-12-04");
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...first.body, replayed: true });
    expect(await liveSecrets(source.id)).toBe(secrets);
    expect(await rotations(source.id)).toBe(1);
    // A replay shows secrets, so it is recorded, as the rotation was.
    expect(await recorded(source.id, "source.rotate_replayed")).toBe(1);
    // The key the gateway signed with before the rotation still works through its grace, and the new one does.
    expect((await deliver(h, source, ndjson([record("evt_rotate_replay_old")]))).status).toBe(200);
    expect((await deliver(h, { ...source, signing_key: first.body.signing_key }, ndjson([record("evt_rotate_replay_new")]))).status).toBe(200);
  });

  it("ends the gateway's key when the repeat carries no key (why the header exists)", async () => {
    const source = await decisionsSource(h, "rotate-no-key");
    await rotate(source.id, { grace_seconds: 600 });
    const repeat = await rotate(source.id, { grace_seconds: 600 });
    expect(repeat.status).toBe(200);
    expect(await rotations(source.id)).toBe(2);
    expect((await deliver(h, source, ndjson([record("evt_rotate_no_key")]))).status).toBe(401);
  });

  it("refuses the same key with another grace_seconds (409 idempotency_key_reused), changing nothing", async () => {
    const source = await decisionsSource(h, "rotate-reused");
    expect((await rotate(source.id, {}, "same-key")).status).toBe(200);
    const before = await h.treeSize();
    const reused = await rotate(source.id, { grace_seconds: 0 }, "same-key");
    expect([reused.status, reused.body.error?.code]).toEqual([409, "idempotency_key_reused"]);
    expect(reused.body.error?.message).toContain("grace_seconds");
    expect(await h.treeSize()).toBe(before);
    // The default grace and the same grace spelled out are one request.
    expect((await rotate(source.id, { grace_seconds: 86_400 }, "same-key")).body.replayed).toBe(true);
  });

  it("shows a rotation's secrets again only while they are current (409 rotation_superseded after the next)", async () => {
    const source = await decisionsSource(h, "rotate-superseded");
    expect((await rotate(source.id, {}, "first")).status).toBe(200);
    expect((await rotate(source.id, {}, "second")).status).toBe(200);
    const stale = await rotate(source.id, {}, "first");
    expect([stale.status, stale.body.error?.code]).toEqual([409, "rotation_superseded"]);
    expect(await rotations(source.id)).toBe(2);
    expect(rotationRows(source.id).map((row) => [row.idempotency_key, row.sealed_answer === null])).toEqual([
      ["first", true],
      ["second", false],
    ]);
  });

  it("keeps the answer sealed: no secret it shows is in the database files", async () => {
    const source = await decisionsSource(h, "rotate-sealed");
    const rotated = await rotate(source.id, {}, "sealed");
    const observer = await h.api<{ id: string }>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "rotate-sealed-observer", upstream_url: "http://127.0.0.1:9/mcp" });
    const observed = await rotate(observer.body.id, {}, "sealed");
    const token = (observed.body as unknown as { observer_token: string }).observer_token;
    expect(token).toMatch(/^bsr_obs_/);
    expect((await rotate(observer.body.id, {}, "sealed")).body).toMatchObject({ observer_token: token, replayed: true });
    const files = Buffer.concat([readFileSync(h.db), readFileSync(`${h.db}-wal`)]);
    for (const secret of [rotated.body.signing_key, rotated.body.api_key, token]) expect(files.includes(secret)).toBe(false);
  });

  it("forgets the answer when the source is disabled (409 source_disabled on a repeat)", async () => {
    const source = await decisionsSource(h, "rotate-disabled");
    expect((await rotate(source.id, {}, "before-disable")).status).toBe(200);
    expect((await h.api("POST", `/api/v1/evidence-sources/${source.id}/disable`)).status).toBe(200);
    const repeat = await rotate(source.id, {}, "before-disable");
    expect([repeat.status, repeat.body.error?.code]).toEqual([409, "source_disabled"]);
    expect(rotationRows(source.id).map((row) => row.sealed_answer)).toEqual([null]);
  });

  it("refuses a key that is empty, too long or not visible ASCII, naming the header (422), and rotates nothing", async () => {
    const source = await decisionsSource(h, "rotate-bad-key");
    const before = await h.treeSize();
    for (const key of ["", "x".repeat(256), "two words", "caf\u00e9", ["sent", "twice"], ["same", "same"]]) {
      const answer = await rotate(source.id, {}, key);
      expect([answer.status, answer.body.error?.code], JSON.stringify(key).slice(0, 20)).toEqual([422, "validation_failed"]);
      expect(answer.body.error?.message).toContain("Idempotency-Key");
    }
    expect((await rotate(source.id, {}, "x".repeat(255))).status).toBe(200);
    expect(await h.treeSize()).toBe(before + 1);
  });

  it("answers 409 rotation_unreadable when the answer was sealed under another master key", async () => {
    const source = await decisionsSource(h, "rotate-other-master-key");
    expect((await rotate(source.id, {}, "sealed-before")).status).toBe(200);
    const sealer = new SecretSealer("another-master-key-0123456789abcdef");
    const elsewhere = new SourceStore({ driver: h.bursar.driver, log: h.bursar.log, sealer, clock: h.clock });
    await expect(elsewhere.rotate(source.id, 86_400, "sealed-before")).rejects.toMatchObject({ status: 409, code: "rotation_unreadable" });
    expect(await rotations(source.id)).toBe(1);
  });

  it("answers a repeat past the replay window 409 rotation_replay_expired, and the sweep erases the answer", async () => {
    const source = await decisionsSource(h, "rotate-window");
    expect((await rotate(source.id, {}, "windowed")).status).toBe(200);
    h.clock.advance(rotation_replay_window_ms - 1_000);
    expect((await rotate(source.id, {}, "windowed")).body.replayed).toBe(true);
    h.clock.advance(1_000);
    const late = await rotate(source.id, {}, "windowed");
    expect([late.status, late.body.error?.code]).toEqual([409, "rotation_replay_expired"]);
    await h.evidence.sources.forgetExpiredRotationAnswers();
    expect(rotationRows(source.id).map((row) => row.sealed_answer)).toEqual([null]);
  });

  it("never shows secrets that ended some other way (409 rotation_superseded)", async () => {
    const source = await decisionsSource(h, "rotate-ended-elsewhere");
    const rotated = await rotate(source.id, {}, "ended-elsewhere");
    expect(rotated.status).toBe(200);
    // As a release without this table, sharing the database, would end them: its own rotation.
    const db = new Database(h.db);
    db.prepare("UPDATE evidence_source_secrets SET expires_at_ms = ? WHERE source_id = ? AND expires_at_ms IS NULL").run(h.clock().getTime(), source.id);
    db.close();
    const repeat = await rotate(source.id, {}, "ended-elsewhere");
    expect([repeat.status, repeat.body.error?.code]).toEqual([409, "rotation_superseded"]);
    expect(JSON.stringify(repeat.body)).not.toContain(rotated.body.signing_key);
  });
});

/** The source's rotation rows as stored, oldest first. */
function rotationRows(source_id: string): Array<{ idempotency_key: string; sealed_answer: string | null }> {
  const db = new Database(h.db, { readonly: true });
  try {
    return db.prepare("SELECT idempotency_key, sealed_answer FROM evidence_source_rotations WHERE source_id = ? ORDER BY created_at_ms, idempotency_key").all(source_id) as Array<{ idempotency_key: string; sealed_answer: string | null }>;
  } finally {
    db.close();
  }
}
