// The webhook's Bursar-Signature check: every way a signature can be wrong is a 401 that
// stores nothing; the right one, with any valid key among several v1 values, is accepted.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureHeader, signature_tolerance_seconds } from "../../src/ingest/signature.js";
import { decisionsSource, deliver, harness, ndjson, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;
let next = 0;
const fresh = () => ndjson([record(`evt_sig_${++next}`)]);

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h);
});
afterAll(async () => h.close());

async function rejected(body: string, options: Parameters<typeof deliver>[3]): Promise<string> {
  const before = await h.treeSize();
  const answer = await deliver(h, source, body, options);
  expect(answer.status).toBe(401);
  expect(await h.treeSize()).toBe(before);
  return answer.body.error.code as string;
}

describe("Bursar-Signature", () => {
  it("accepts a valid signature and stores the record", async () => {
    const answer = await deliver(h, source, fresh());
    expect(answer.status).toBe(200);
    expect(answer.body.written).toBe(1);
  });

  it("refuses a signature made with the wrong key", async () => {
    expect(await rejected(fresh(), { keys: ["bsr_whsec_not-the-key"] })).toBe("signature_mismatch");
  });

  it("refuses t older or newer than the tolerance, and accepts t exactly at it", async () => {
    const now = h.clock().getTime();
    const past = new Date(now - (signature_tolerance_seconds + 1) * 1000);
    const future = new Date(now + (signature_tolerance_seconds + 1) * 1000);
    expect(await rejected(fresh(), { at: past })).toBe("signature_stale");
    expect(await rejected(fresh(), { at: future })).toBe("signature_stale");
    expect((await deliver(h, source, fresh(), { at: new Date(now - signature_tolerance_seconds * 1000) })).status).toBe(200);
    expect((await deliver(h, source, fresh(), { at: new Date(now + signature_tolerance_seconds * 1000) })).status).toBe(200);
  });

  it("uses the injected clock for the tolerance", async () => {
    const body = fresh();
    const header = signatureHeader([source.signing_key], Buffer.from(body), h.clock());
    h.clock.advance((signature_tolerance_seconds + 1) * 1000);
    try {
      expect(await rejected(body, { header })).toBe("signature_stale");
    } finally {
      h.clock.advance(-(signature_tolerance_seconds + 1) * 1000);
    }
  });

  it("refuses a missing or garbled header, and a t with a leading zero (the HMAC covers t as sent)", async () => {
    const response = await fetch(`${h.url}/ingest/${source.id}`, { method: "POST", body: fresh() });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("signature_missing");
    for (const header of ["garbage", "t=abc,v1=00", "v1=" + "a".repeat(64), `t=${Math.floor(Date.now() / 1000)}`, "t=1,t=2,v1=" + "a".repeat(64), `t=1,v1=zz`, `t=0${Math.floor(Date.now() / 1000)},v1=${"a".repeat(64)}`]) {
      expect(await rejected(fresh(), { header })).toBe("signature_malformed");
    }
  });

  it("accepts two v1 values when one of them is valid", async () => {
    const answer = await deliver(h, source, fresh(), { keys: ["bsr_whsec_old-or-wrong", source.signing_key] });
    expect(answer.status).toBe(200);
  });

  it("refuses a body changed by one byte after signing", async () => {
    const body = fresh();
    const header = signatureHeader([source.signing_key], Buffer.from(body), h.clock());
    const changed = body.replace("v2.4.0", "v2.4.1");
    expect(changed.length).toBe(body.length);
    expect(await rejected(changed, { header })).toBe("signature_mismatch");
  });

  it("after rotation accepts old and new keys during the grace period, then only the new key", async () => {
    const rotated = await h.api<{ signing_key: string; api_key: string }>("POST", `/api/v1/evidence-sources/${source.id}/rotate`, { grace_seconds: 60 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.signing_key).not.toBe(source.signing_key);
    expect((await deliver(h, source, fresh())).status).toBe(200);
    expect((await deliver(h, source, fresh(), { keys: [rotated.body.signing_key] })).status).toBe(200);
    h.clock.advance(61_000);
    expect(await rejected(fresh(), { keys: [source.signing_key] })).toBe("signature_mismatch");
    expect((await deliver(h, source, fresh(), { keys: [rotated.body.signing_key] })).status).toBe(200);
    source = { ...source, signing_key: rotated.body.signing_key, api_key: rotated.body.api_key };
  });
});
