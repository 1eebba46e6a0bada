// The SSE reader charges what it holds (a line or an event still arriving) to the observer's one
// budget for bytes held to read, gives it back as events end and when the stream does, and skips
// an event the budget cannot take as one too large to read.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SseReader, type HeldBudget } from "../../src/observer/sse.js";

/** A budget of `limit` bytes that remembers the most it ever lent. */
function budget(limit: number): HeldBudget & { bytes: number; most: number } {
  return {
    bytes: 0,
    most: 0,
    take(bytes) {
      if (this.bytes + bytes > limit) return false;
      this.bytes += bytes;
      this.most = Math.max(this.most, this.bytes);
      return true;
    },
    give(bytes) {
      this.bytes -= bytes;
      expect(this.bytes).toBeGreaterThanOrEqual(0);
    },
  };
}

/** Feeds `text` in pieces cut at `cuts`; returns the events read and how many were skipped. */
function read(text: string, cuts: readonly number[], held?: HeldBudget) {
  const events: string[] = [];
  let skipped = 0;
  const reader = new SseReader((data) => events.push(data), () => skipped++, held);
  const bytes = Buffer.from(text);
  let at = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1))].sort((a, b) => a - b)) {
    reader.push(bytes.subarray(at, cut));
    at = cut;
  }
  reader.push(bytes.subarray(at));
  return { events, skipped, reader };
}

const stream = fc.array(fc.record({ data: fc.string({ maxLength: 40 }), lines: fc.integer({ min: 1, max: 3 }) }), { maxLength: 8 }).map((events) =>
  events.map(({ data, lines }) => `${Array.from({ length: lines }, () => `data: ${data.replace(/[\r\n]/g, " ")}`).join("\n")}\n\n`).join(""),
);

describe("the SSE reader's budget", () => {
  it("changes nothing while it has room, and is given back whole once the stream ends", () => {
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 6 }), (text, cuts) => {
        const held = budget(Number.MAX_SAFE_INTEGER);
        const unbounded = read(text, cuts);
        const charged = read(text, cuts, held);
        expect(charged.events).toEqual(unbounded.events);
        expect(charged.skipped).toBe(0);
        charged.reader.release();
        expect(held.bytes).toBe(0);
      }),
    );
  });

  it("holds an event only while it arrives: a finished event gives its bytes back", () => {
    const held = budget(1_000);
    const { events, reader } = read(`data: ${"a".repeat(300)}\n\ndata: ${"b".repeat(300)}\n\n`, [], held);
    expect(events).toEqual(["a".repeat(300), "b".repeat(300)]);
    expect(held.bytes).toBe(0);
    reader.push(Buffer.from(`data: ${"c".repeat(100)}\n`));
    expect(held.bytes).toBe(2 * 101);
    reader.release();
    expect(held.bytes).toBe(0);
  });

  it("skips an event the budget cannot take after a chunk, as too large, and reads the next one", () => {
    const held = budget(1_000);
    // After 520 bytes the unfinished line holds 1,040.
    const { events, skipped } = read(`data: ${"a".repeat(600)}\n\ndata: ok\n\n`, [100, 300, 520], held);
    expect(events).toEqual(["ok"]);
    expect(skipped).toBe(1);
    expect(held.most).toBeLessThanOrEqual(1_000);
    expect(held.bytes).toBe(0);
  });
});
