import { getEventListeners, setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { deadline } from "../../src/deadline.js";

describe("deadline", () => {
  it("aborts with a TimeoutError carrying its message once the time passes", async () => {
    const limit = deadline(20, "no answer within 20 ms");
    expect(limit.signal.aborted).toBe(false);
    await sleep(60);
    expect(limit.signal.aborted).toBe(true);
    const reason = limit.signal.reason as DOMException;
    expect({ name: reason.name, message: reason.message }).toEqual({ name: "TimeoutError", message: "no answer within 20 ms" });
  });

  it("aborts with the parent's reason, at once when the parent has already aborted", () => {
    const parent = new AbortController();
    const limit = deadline(60_000, "late", parent.signal);
    const why = new Error("interrupted");
    parent.abort(why);
    expect(limit.signal.reason).toBe(why);
    limit.release();

    const before = deadline(60_000, "late", parent.signal);
    expect(before.signal.reason).toBe(why);
    before.release();
  });

  it("once released, neither fires nor leaves anything on the parent", async () => {
    const parent = new AbortController();
    setMaxListeners(1_000, parent.signal);
    const limits = Array.from({ length: 1_000 }, () => deadline(20, "late", parent.signal));
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(1_000);
    for (const limit of limits) limit.release();
    expect(getEventListeners(parent.signal, "abort")).toHaveLength(0);
    await sleep(60);
    parent.abort();
    expect(limits.filter((limit) => limit.signal.aborted)).toHaveLength(0);
  });
});
