// Checks a mutation review found guarded by no test (each test here fails with its check
// changed): a signature header of several v1 values, and one event_id twice in one delivery.
// (An approver with two names, one the agent's: approval.test.ts.)

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decisionsSource, deliver, harness, ndjson, record, type DecisionsSource, type Harness } from "./support.js";

let h: Harness;
let source: DecisionsSource;
let next = 0;
const fresh = () => ndjson([record(`evt_mutgap_${++next}`)]);

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h);
});
afterAll(async () => h.close());

describe("several v1 values", () => {
  it("refuses a header of several v1 values none of which is valid, storing nothing", async () => {
    for (const keys of [["bsr_whsec_wrong-1", "bsr_whsec_wrong-2"], ["bsr_whsec_wrong-1", "bsr_whsec_wrong-2", "bsr_whsec_wrong-3"]]) {
      const before = await h.treeSize();
      const answer = await deliver(h, source, fresh(), { keys });
      expect(answer.status).toBe(401);
      expect(answer.body.error.code).toBe("signature_mismatch");
      expect(await h.treeSize()).toBe(before);
    }
  });

  it("accepts the valid v1 wherever it stands among them: first, middle or last", async () => {
    for (const keys of [[source.signing_key, "bsr_whsec_wrong"], ["bsr_whsec_a", source.signing_key, "bsr_whsec_b"], ["bsr_whsec_wrong", source.signing_key]]) {
      const answer = await deliver(h, source, fresh(), { keys });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body.written).toBe(1);
    }
  });
});

describe("one event_id twice in one delivery", () => {
  it("answers 409 event_id_conflict when the repeat has other bytes, storing neither", async () => {
    const before = await h.treeSize();
    const answer = await deliver(h, source, ndjson([record("evt_mutgap_twice"), record("evt_mutgap_twice", { decision: "deny" })]));
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.error.code).toBe("event_id_conflict");
    expect(answer.body.error.details.records).toEqual([{ index: 1, event_id: "evt_mutgap_twice" }]);
    expect(await h.treeSize()).toBe(before);
  });

  it("takes an identical repeat once, listing it twice", async () => {
    const answer = await deliver(h, source, ndjson([record("evt_mutgap_same"), record("evt_mutgap_same")]));
    expect(answer.status).toBe(200);
    expect(answer.body.written).toBe(1);
    expect(answer.body.duplicates).toBe(1);
  });
});
