// The SSE reader charges what it holds (a line or an event still arriving) to the observer's one
// budget for bytes held to read, gives it back as events end and when the stream does, and skips
// an event the budget cannot take as one too large to read.

import fc from "fast-check";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { piece_overhead_bytes, sse_event_chars_max, SseReader, type HeldBudget } from "../../src/observer/sse.js";
import { ensureBuilt, repo_root } from "../support/build.js";

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
    expect(held.bytes).toBe(2 * 101 + piece_overhead_bytes);
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

  it("drops the rest of a line cut short by the budget up to its end, never reading it as a line of its own", () => {
    const held = budget(1_000);
    const answer = '{"jsonrpc":"2.0","id":1,"result":{"content":[]}}';
    // The client's event is 600 x's and the answer on two data lines: not JSON, so no answer read.
    const { events, skipped } = read(`data: ${"x".repeat(600)}\ndata: ${answer}\n\ndata: next\n\n`, [606], held);
    expect(events).toEqual(["next"]);
    expect(skipped).toBe(1);
  });

  it("says nothing of an event cut short by the budget that never ended", () => {
    const held = budget(1_000);
    // The SDK writes one data line an event: its line end comes alone, after the line was skipped.
    const text = `event: message\ndata: {"pad":"${"p".repeat(600)}"}\n`;
    const { skipped, reader } = read(text, [text.length - 1], held);
    reader.release();
    expect(skipped).toBe(0);
    expect(held.bytes).toBe(0);
  });

  it("takes nothing from the budget for the rest of a skipped line", () => {
    const held = budget(2_000);
    const reader = new SseReader(() => undefined, () => undefined, held);
    reader.push(Buffer.from(`data: ${"x".repeat(1_194)}`));
    expect(held.bytes).toBe(0);
    reader.push(Buffer.from("y".repeat(900)));
    expect(held.bytes).toBe(0);
    reader.push(Buffer.from("\ndata: z"));
    expect(held.bytes).toBe(2 * "data: z".length + piece_overhead_bytes);
  });

  it("reads an event whose data lines arrive over many chunks as one piece would give it", () => {
    const lines = Array.from({ length: 50 }, (_, i) => `line ${i} ${"q".repeat(i)}`);
    const text = `${lines.map((line) => `data: ${line}`).join("\r\n")}\r\n\r\n`;
    const cuts = Array.from({ length: 40 }, (_, i) => 37 * i + 5);
    expect(read(text, cuts, budget(1_000_000)).events).toEqual([lines.join("\n")]);
  });

  it("holds no more than it is charged for: a data line kept from a chunk does not keep the chunk's text alive", () => {
    ensureBuilt();
    // 300 chunks of a 64 KB comment and a 20-character data line of one event still arriving:
    // kept as slices of the chunks' text they held 300 x 64 KB; charged 300 x 98 bytes.
    const script = `
      const { SseReader } = await import(${JSON.stringify(join(repo_root, "dist/src/observer/sse.js"))});
      let charged = 0;
      const reader = new SseReader(() => {}, () => {}, { take: (n) => ((charged += n), true), give: (n) => void (charged -= n) });
      globalThis.gc(); const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 300; i++) reader.push(Buffer.from(":" + "p".repeat(65_000) + "\\ndata: 0123456789abcdef\\n"));
      globalThis.gc(); console.log(JSON.stringify({ retained: process.memoryUsage().heapUsed - before, charged }));`;
    const out = execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 60_000 });
    const { retained, charged } = JSON.parse(out) as { retained: number; charged: number };
    expect(charged).toBe(300 * (2 * 17 + 64));
    expect(retained).toBeLessThan(2_000_000);
  });

  it("charges a line arriving a byte at a time for the pieces it is held in, not only its characters", () => {
    const held = budget(Number.MAX_SAFE_INTEGER);
    const reader = new SseReader(() => undefined, () => undefined, held);
    for (const byte of Buffer.from("data: 0123456789")) reader.push(Buffer.from([byte]));
    expect(held.bytes).toBe(2 * 16 + 16 * piece_overhead_bytes);
  });

  it("does not say an event was skipped when only a comment or another field of it was dropped", () => {
    const held = budget(500);
    const { events, skipped } = read(`: ${"p".repeat(300)}\nevent: message\ndata: kept\n\n`, [200], held);
    expect(events).toEqual(["kept"]);
    expect(skipped).toBe(0);
    const dropped = read(`data:${"p".repeat(300)}\n\n`, [200], budget(300));
    expect(dropped.skipped).toBe(1);
  });
});

describe("the SSE reader's event types", () => {
  // The MCP SDK's client takes only an unnamed or "message" event as a JSON-RPC message: an event
  // of another type answers nothing, whatever its data holds, and its answer comes in a later one.
  it("gives only unnamed and message events, an empty type being message", () => {
    const text = 'event: debug\ndata: {"id":1}\n\nevent: message\ndata: a\n\ndata: b\n\nevent:\ndata: c\n\nevent: Message\ndata: d\n\ndata: e\nevent: debug\n\n';
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 6 }), (cuts) => {
        expect(read(text, cuts).events).toEqual(["a", "b", "c"]);
      }),
    );
  });

  it("says nothing of a skipped event of another type, and takes a type too long to read for another type", () => {
    const other = read(`event: debug\ndata:${"p".repeat(300)}\n\ndata: next\n\n`, [], budget(300));
    expect(other).toMatchObject({ events: ["next"], skipped: 0 });
    const long_type = read(`event: ${"t".repeat(sse_event_chars_max)}\ndata: {"id":1}\n\ndata: next\n\n`, [100]);
    expect(long_type).toMatchObject({ events: ["next"], skipped: 0 });
  });

  it("says an event whose type line the budget could not hold was skipped: it may have been a message", () => {
    // The MCP SDK's server starts every event with `event: message`; a chunk ends inside it.
    const answer = 'event: message\nid: s1_1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n';
    expect(read(answer, ["event: mess".length], budget(20))).toMatchObject({ events: [], skipped: 1 });
  });
});
