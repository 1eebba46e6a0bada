// Deliveries take turns to be decoded, validated and stored: at most 2 at once in the process,
// across /ingest, events and upload, up to 32 more waiting in arrival order, and past them 503
// `busy` with Retry-After: 5, nothing stored. ingestDelivery is wrapped (the real one runs inside)
// to see how many run at once and to hold them where a test needs the turns full; no timing.

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { deliveries_busy_retry_after_seconds, deliveries_in_progress_max, deliveries_waiting_max, delivery_turns, DeliveryTurns } from "../../src/ingest/turns.js";
import { decisionsSource, harness, ingest_routes, ndjson, postDelivery, record, type DecisionsSource, type Harness, type IngestRoute } from "./support.js";

/** What the wrapped ingestDelivery saw: event ids in the order their deliveries ran, how many ran at once. */
const seen = vi.hoisted(() => ({
  held: false,
  holding: [] as Array<() => void>,
  entered: [] as string[],
  running: 0,
  running_max: 0,
  /** Event ids whose ingestDelivery throws a plain Error (an exception, not an HttpError). */
  throwing: new Set<string>(),
}));

vi.mock("../../src/ingest/ingest.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/ingest/ingest.js")>();
  const ingestDelivery: typeof original.ingestDelivery = async (...args) => {
    const event_id = /"event_id":"([^"]+)"/.exec(args[2].toString("utf8"))?.[1] ?? "(none)";
    seen.entered.push(event_id);
    seen.running++;
    seen.running_max = Math.max(seen.running_max, seen.running);
    try {
      if (seen.held) await new Promise<void>((resolve) => seen.holding.push(resolve));
      if (seen.throwing.has(event_id)) throw new Error(`${event_id} fails inside ingestDelivery`);
      return await original.ingestDelivery(...args);
    } finally {
      seen.running--;
    }
  };
  return { ...original, ingestDelivery };
});

let h: Harness;
let source: DecisionsSource;

beforeAll(async () => {
  h = await harness();
  source = await decisionsSource(h, "turns");
});
afterAll(async () => h.close());

const admitted_max = deliveries_in_progress_max + deliveries_waiting_max;

interface Answer {
  status: number;
  retry_after: string | null;
  body: Record<string, any>;
}

async function post(route: IngestRoute, body: Buffer): Promise<Answer> {
  const answer = await postDelivery(h, source, route, body);
  return { status: answer.status, retry_after: answer.headers.get("retry-after"), body: answer.body };
}

/** Waits, a few ms at a time and at most ~20 s, until `reached`; throws naming `what` otherwise. */
async function until(what: string, reached: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 4_000; attempt++) {
    if (reached()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`not reached: ${what}`);
}

interface Flood {
  event_ids: string[];
  answers: Answer[];
  /** The turns' gauge once every delivery was sent and none let through. */
  gauge_full: { in_progress: number; waiting: number };
  /** Deliveries that had reached ingestDelivery then. */
  entered_full: number;
  /** /metrics as scraped then. */
  metrics_full: string;
  tree_before: number;
}

/**
 * Sends `count` one-record deliveries (the routes in turn), each only once the one before it has
 * been admitted or answered, so their arrival order is known; all stay unanswered while ingestion
 * is held. Once all are sent, lets ingestion go on and waits for every answer.
 */
async function flood(prefix: string, count: number, body: (event_id: string) => Buffer = (event_id) => Buffer.from(ndjson([record(event_id)]))): Promise<Flood> {
  const tree_before = await h.treeSize();
  seen.entered.length = 0;
  seen.running_max = 0;
  seen.held = true;
  const event_ids = Array.from({ length: count }, (_, i) => `evt_${prefix}_${i}`);
  const answered: Answer[] = [];
  const pending = event_ids.map(async (event_id, i) => {
    // Sent once every earlier one is admitted (counted by the turns), answered, or, with no turns
    // to count it, running in ingestDelivery.
    await until(`delivery ${i} sent`, () => {
      const { in_progress, waiting } = delivery_turns.gauge();
      return in_progress + waiting + answered.length >= i || seen.entered.length >= i;
    });
    const answer = await post(ingest_routes[i % ingest_routes.length]!, body(event_id));
    answered.push(answer);
    return answer;
  });
  await until(`all ${count} sent and admitted or answered`, () => {
    const { in_progress, waiting } = delivery_turns.gauge();
    return in_progress + waiting + answered.length >= count || seen.entered.length >= count;
  });
  const gauge_full = delivery_turns.gauge();
  const entered_full = seen.entered.length;
  const metrics_full = await (await fetch(`${h.url}/metrics`)).text();
  seen.held = false;
  for (const resume of seen.holding.splice(0)) resume();
  const answers = await Promise.all(pending);
  return { event_ids, answers, gauge_full, entered_full, metrics_full, tree_before };
}

describe("deliveries past 2 in progress and 32 waiting", () => {
  it("are answered 503 busy with Retry-After: 5 and store nothing, while every admitted one gets its receipt", async () => {
    const { event_ids, answers, tree_before } = await flood("busy", admitted_max + 3);
    const extra = answers.slice(admitted_max);
    for (const [i, answer] of extra.entries()) {
      expect({ i, status: answer.status, retry_after: answer.retry_after, code: answer.body.error?.code, keys: Object.keys(answer.body) }).toEqual({
        i,
        status: 503,
        retry_after: String(deliveries_busy_retry_after_seconds),
        code: "busy",
        keys: ["error"],
      });
      expect(answer.body.error.message).toBe(`too many deliveries are being stored or waiting (2 at once, 32 waiting); deliver again in 5 s`);
    }
    for (const [i, answer] of answers.slice(0, admitted_max).entries()) {
      expect({ i, status: answer.status, listed: answer.body.receipt?.records.map((r: { event_id: string }) => r.event_id) }).toEqual({ i, status: 200, listed: [event_ids[i]] });
    }
    const stored = (await h.entries("ingest.decision")).map((stored) => (stored.entry.body.record as { event_id: string }).event_id);
    for (const event_id of event_ids.slice(admitted_max)) expect(stored).not.toContain(event_id);
    expect(await h.treeSize()).toBe(tree_before + admitted_max);
    expect(delivery_turns.gauge()).toEqual({ in_progress: 0, waiting: 0 });
  });
});

describe("deliveries sent at once, across the three routes", () => {
  it("are decoded and stored at most 2 at a time, the rest waiting in arrival order", async () => {
    const { event_ids, answers, gauge_full, entered_full, metrics_full } = await flood("at-once", admitted_max);
    expect({ gauge_full, entered_full }).toEqual({ gauge_full: { in_progress: deliveries_in_progress_max, waiting: deliveries_waiting_max }, entered_full: deliveries_in_progress_max });
    // An operator sees it in /metrics.
    expect(metrics_full).toContain(`bursar_ingest_deliveries{state="in_progress"} ${deliveries_in_progress_max}\n`);
    expect(metrics_full).toContain(`bursar_ingest_deliveries{state="waiting"} ${deliveries_waiting_max}\n`);
    expect(seen.running_max).toBe(deliveries_in_progress_max);
    expect(seen.entered).toEqual(event_ids);
    expect(answers.map((answer) => answer.status)).toEqual(event_ids.map(() => 200));
  });

  it("are each stored exactly once when admitted, as their receipts say, and never when refused", async () => {
    const { event_ids, answers, tree_before } = await flood("once", admitted_max + 2);
    const stored_ids = answers.flatMap((answer, i) => (answer.status === 200 ? [event_ids[i]!] : []));
    expect(stored_ids).toEqual(event_ids.slice(0, admitted_max));
    const entries = (await h.entries("ingest.decision")).filter((stored) => stored.seq >= tree_before);
    expect(entries.map((stored) => (stored.entry.body.record as { event_id: string }).event_id).sort()).toEqual([...stored_ids].sort());
    const receipted = answers.flatMap((answer) => (answer.status === 200 ? [answer.body.receipt.records[0].seq as number] : [])).sort((a, b) => a - b);
    expect(receipted).toEqual(entries.map((stored) => stored.seq));
    expect(await h.treeSize()).toBe(tree_before + admitted_max);
  });
});

describe("a delivery's turn", () => {
  it("is given back however it ends (422, 409, an exception), so as many are admitted after as before", async () => {
    // One record stored first, so a later delivery of its event_id with other bytes is a conflict.
    const conflicting = "evt_freed_conflict";
    expect((await post("events", Buffer.from(ndjson([record(conflicting)])))).status).toBe(200);
    const failing = (event_id: string): Buffer => {
      // Each route gets each kind: the routes go in turn, the kinds every third delivery.
      const kind = Math.floor(Number(event_id.split("_").at(-1)) / 3) % 3;
      if (kind === 0) return Buffer.from(ndjson([record(event_id, { decision: "maybe" })]));
      if (kind === 1) return Buffer.from(ndjson([record(conflicting, { tool: event_id })]));
      seen.throwing.add(event_id);
      return Buffer.from(ndjson([record(event_id)]));
    };
    const failed = await flood("freed", admitted_max, failing);
    expect(failed.answers.map((answer) => answer.status)).toEqual(failed.event_ids.map((_, i) => [422, 409, 500][Math.floor(i / 3) % 3]));
    seen.throwing.clear();
    expect(delivery_turns.gauge()).toEqual({ in_progress: 0, waiting: 0 });
    const after = await flood("after-freed", admitted_max + 1);
    expect(after.answers.map((answer) => answer.status)).toEqual([...after.event_ids.slice(0, admitted_max).map(() => 200), 503]);
  });
});

describe("DeliveryTurns", () => {
  it("gives the event loop a turn between one delivery and the next", async () => {
    const turns = new DeliveryTurns(1, 1);
    const order: string[] = [];
    const first = turns.run(async () => {
      // Queued as the first delivery ends, as the I/O of a request that came meanwhile would be.
      setImmediate(() => order.push("another request"));
    });
    const second = turns.run(async () => {
      order.push("second delivery");
    });
    await Promise.all([first, second]);
    expect(order).toEqual(["another request", "second delivery"]);
  });

  it("is full at its limits, and refuses to run a delivery past them", async () => {
    const turns = new DeliveryTurns(1, 1);
    let finish!: () => void;
    const running = turns.run(() => new Promise<void>((resolve) => (finish = resolve)));
    const waiting = turns.run(async () => "done");
    expect({ full: turns.full, gauge: turns.gauge() }).toEqual({ full: true, gauge: { in_progress: 0, waiting: 2 } });
    await until("the first delivery runs", () => turns.gauge().in_progress === 1);
    expect(turns.gauge()).toEqual({ in_progress: 1, waiting: 1 });
    await expect(turns.run(async () => "past the limit")).rejects.toThrow("a delivery was admitted past 1 waiting");
    finish();
    await running;
    expect(await waiting).toBe("done");
    expect({ full: turns.full, gauge: turns.gauge() }).toEqual({ full: false, gauge: { in_progress: 0, waiting: 0 } });
  });
});
