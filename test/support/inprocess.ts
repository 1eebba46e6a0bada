// The gate.decision entry a tool result's evidence names, read back from the log.

import { expect } from "vitest";
import { canonicalJson } from "../../src/evidence/canonical.js";
import type { StoredEntry } from "../../src/evidence/store.js";
import type { Bursar } from "../../src/index.js";

/** The body of the decision entry a tool result's evidence names, and the entry's canonical text. */
export async function decisionBody(b: Bursar, result: { structuredContent: Record<string, unknown> }): Promise<{ body: Record<string, unknown>; text: string }> {
  const { seq } = result.structuredContent.evidence as { seq: number };
  const [stored] = await b.log.entries(seq, seq + 1);
  const entry = (stored as StoredEntry).entry;
  expect(entry.kind).toBe("gate.decision");
  return { body: entry.body as Record<string, unknown>, text: canonicalJson(entry) };
}
