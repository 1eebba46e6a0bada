// Evidence sources: secrets shown once, stored as SHA-256 (bearer secrets) or sealed with
// AES-256-GCM under the master key (the signing key), listed without secrets, disabled.

import { readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/ids.js";
import { SealError, SecretSealer } from "../../src/sources/sealed.js";
import { decisionsSource, deliver, harness, master_key, ndjson, record, type Harness } from "./support.js";

let h: Harness;
beforeAll(async () => {
  h = await harness();
});
afterAll(async () => h.close());

describe("evidence sources", () => {
  it("shows secrets once and stores bearer secrets as SHA-256 and the signing key sealed", async () => {
    const source = await decisionsSource(h, "stored-secrets");
    expect(source.signing_key).toMatch(/^bsr_whsec_/);
    expect(source.api_key).toMatch(/^bsr_srckey_/);
    expect(source.ingest_url).toBe(`${h.url}/ingest/${source.id}`);
    const observer = await h.api<{ observer_token: string; observer_url: string; origin: string }>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "obs", upstream_url: "http://127.0.0.1:9/mcp?x=1" });
    expect(observer.body.origin).toBe("http://127.0.0.1:9");
    expect(observer.body.observer_url).toBe(`${h.url}/observe`);
    const listed = JSON.stringify((await h.api("GET", "/api/v1/evidence-sources")).body);
    const db = new Database(h.db, { readonly: true });
    const rows = db.prepare("SELECT purpose, token_sha256, ciphertext, secret_id FROM evidence_source_secrets").all() as Array<{ purpose: string; token_sha256: string | null; ciphertext: string | null; secret_id: string }>;
    db.close();
    const file = Buffer.concat([readFileSync(h.db), readFileSync(`${h.db}-wal`)]);
    for (const secret of [source.signing_key, source.api_key, observer.body.observer_token]) {
      expect(listed).not.toContain(secret);
      expect(file.includes(secret)).toBe(false);
    }
    expect(rows.some((row) => row.token_sha256 === sha256Hex(source.api_key))).toBe(true);
    expect(rows.some((row) => row.token_sha256 === sha256Hex(observer.body.observer_token))).toBe(true);
    const sealed = rows.find((row) => row.purpose === "signing_key" && new SecretSealer(master_key).open(row.ciphertext!, row.secret_id) === source.signing_key);
    expect(sealed).toBeDefined();
    expect(() => new SecretSealer("another-master-key-0123456789").open(sealed!.ciphertext!, sealed!.secret_id)).toThrow(SealError);
    expect(() => new SecretSealer(master_key).open(sealed!.ciphertext!, "sec_other")).toThrow(SealError);
  });

  it("validates creation: observers need an http(s) upstream without credentials", async () => {
    for (const body of [
      { kind: "observer", name: "x" },
      { kind: "observer", name: "x", upstream_url: "ftp://host/" },
      { kind: "observer", name: "x", upstream_url: "http://user:pw@host/" },
      { kind: "decisions", name: "x", upstream_url: "http://host/" },
      { kind: "decisions", name: "" },
      { kind: "decisions", name: "a\u0000b" },
      { kind: "other", name: "x" },
    ]) {
      const answer = await h.api<{ error: { code: string } }>("POST", "/api/v1/evidence-sources", body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
    }
    expect((await h.api("POST", "/api/v1/evidence-sources", { kind: "decisions", name: "x" }, "not-the-operator")).status).toBe(401);
  });

  it("refuses deliveries to a disabled source with 403 and stores nothing", async () => {
    const source = await decisionsSource(h, "to-disable");
    expect((await deliver(h, source, ndjson([record("evt_before_disable")]))).status).toBe(200);
    const disabled = await h.api<{ disabled_at: string | null }>("POST", `/api/v1/evidence-sources/${source.id}/disable`);
    expect(disabled.body.disabled_at).not.toBeNull();
    const before = await h.treeSize();
    expect((await deliver(h, source, ndjson([record("evt_after_disable")]))).status).toBe(403);
    expect(await h.treeSize()).toBe(before);
  });

  it("answers an unknown source as a wrong signature (401 signature_mismatch), not 404: ids cannot be probed", async () => {
    const unknown = { id: "src_unknown", signing_key: "k", api_key: "a", ingest_url: "" };
    const answer = await deliver(h, unknown, ndjson([record("evt_unknown")]));
    expect({ status: answer.status, code: answer.body.error?.code }).toEqual({ status: 401, code: "signature_mismatch" });
  });

  it("ends an old observer token at its grace's end even while its lookup is cached", async () => {
    const created = await h.api<{ id: string; observer_token: string }>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "rotated-observer", upstream_url: "http://127.0.0.1:9/mcp" });
    expect(created.status).toBe(201);
    const rotated = await h.api<{ observer_token: string }>("POST", `/api/v1/evidence-sources/${created.body.id}/rotate`, { grace_seconds: 2 });
    expect(rotated.status).toBe(200);
    // Looked up (and cached for up to 5 s) during the grace: both tokens open the source.
    expect((await h.evidence.sources.observerByToken(created.body.observer_token))?.source_id).toBe(created.body.id);
    expect((await h.evidence.sources.observerByToken(rotated.body.observer_token))?.source_id).toBe(created.body.id);
    h.clock.advance(2_000);
    expect(await h.evidence.sources.observerByToken(created.body.observer_token)).toBeNull();
    expect((await h.evidence.sources.observerByToken(rotated.body.observer_token))?.source_id).toBe(created.body.id);
  });

  it("refuses to rotate a disabled source or change its shadow settings (409 source_disabled)", async () => {
    const created = await h.api<{ id: string }>("POST", "/api/v1/evidence-sources", { kind: "observer", name: "disabled-observer", upstream_url: "http://127.0.0.1:9/mcp" });
    expect((await h.api("POST", `/api/v1/evidence-sources/${created.body.id}/disable`)).status).toBe(200);
    const before = await h.treeSize();
    for (const [method, path, body] of [
      ["PUT", "shadow", { shadow: null }],
      ["POST", "rotate", {}],
    ] as const) {
      const answer = await h.api<{ error: { code: string } }>(method, `/api/v1/evidence-sources/${created.body.id}/${path}`, body);
      expect([path, answer.status, answer.body.error.code]).toEqual([path, 409, "source_disabled"]);
    }
    expect(await h.treeSize()).toBe(before);
  });

  it("writes a gate.operator entry for create, rotate and disable", async () => {
    const actions = (await h.entries("gate.operator")).map((stored) => stored.entry.body.action);
    expect(actions).toEqual(expect.arrayContaining(["source.create", "source.disable"]));
  });
});
