// Past the bound on calls awaiting answers (pending_calls_max, pending_bytes_max), the source
// holding the most gives up its oldest: one source's clients, parking calls for resumed streams
// that never come, cannot push out another source's calls. Within one source, the oldest goes.

import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { Correlator, heldArguments, heldId, pending_bytes_max, pending_calls_max, type PendingCall } from "../../src/observer/calls.js";
import type { ObserverSource } from "../../src/sources/store.js";

const sourceNamed = (source_id: string): ObserverSource => ({ source_id, upstream: new URL("http://upstream.test:8080/mcp"), shadow: null });

function call(source: ObserverSource, exchange: number, bytes = 1024): PendingCall {
  return { source, session: "", exchange, id: heldId(1), ...heldArguments(source, "pay", {}, new Date(0)), started_at: new Date(0), started_ms: performance.now(), bytes };
}

function correlator(): { correlator: Correlator; evicted: PendingCall[] } {
  const evicted: PendingCall[] = [];
  return { correlator: new Correlator((given_up) => void evicted.push(given_up)), evicted };
}

describe("calls awaiting answers past the bound", () => {
  it("by count: the source with the most gives up its oldest, another source's calls stay", () => {
    const [a, b] = [sourceNamed("src_a"), sourceNamed("src_b")];
    const { correlator: pending, evicted } = correlator();
    for (let exchange = 1; exchange <= 5; exchange++) pending.add(call(b, exchange));
    for (let exchange = 6; exchange <= pending_calls_max + 10; exchange++) pending.add(call(a, exchange));
    expect(pending.size).toBe(pending_calls_max);
    expect(evicted).toHaveLength(10);
    expect(evicted.every((given_up) => given_up.source === a)).toBe(true);
    // A's oldest, in arrival order.
    expect(evicted.map((given_up) => given_up.exchange)).toEqual(Array.from({ length: 10 }, (_, index) => 6 + index));
    for (let exchange = 1; exchange <= 5; exchange++) expect(pending.takeOwn(exchange, heldId(1).key)?.source).toBe(b);
  });

  it("by bytes: the source holding the most bytes gives up its oldest", () => {
    const [a, b] = [sourceNamed("src_a"), sourceNamed("src_b")];
    const { correlator: pending, evicted } = correlator();
    const quarter = pending_bytes_max / 4;
    pending.add(call(b, 1, quarter));
    pending.add(call(a, 2, quarter));
    pending.add(call(a, 3, quarter));
    pending.add(call(a, 4, quarter));
    // Full: a new call of B's makes A, holding three quarters, give up its oldest.
    pending.add(call(b, 5, quarter));
    expect(evicted.map((given_up) => given_up.exchange)).toEqual([2]);
  });

  it("within one source: the oldest goes", () => {
    const a = sourceNamed("src_a");
    const { correlator: pending, evicted } = correlator();
    for (let exchange = 1; exchange <= pending_calls_max + 2; exchange++) pending.add(call(a, exchange));
    expect(evicted.map((given_up) => given_up.exchange)).toEqual([1, 2]);
  });
});
