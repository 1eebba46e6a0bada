// Batched decisions on PostgreSQL: create_order calls decided together in one transaction give
// exactly what deciding them one after another gives (verdicts, rows and the evidence log, byte
// for byte); a call whose block another transaction holds waits for a later batch without
// holding the others up; a batch that fails is decided again call by call.

import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { sequentialIds } from "../../src/ids.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { append_batch_max } from "../../src/evidence/index.js";
import { batchable, decision_batch_max, DecisionQueue, readState, type BatchOptions } from "../../src/ledger/authorize-batch.js";
import { lockBlock } from "../../src/ledger/statements.js";
import { CommitOutcomeUnknownError } from "../../src/ledger/driver.js";
import { Ledger, type AuthorizeInput, type AuthorizeResult, type EvidenceWriter } from "../../src/ledger/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";
import { manualClock, type ManualClock } from "../support/clock.js";

const pg_server = postgresServerUrl();
const signingKey = generateSigningKeyPem();

describe("batchable", () => {
  it("takes create_order calls by an agent, and not captures, anonymous calls or keys jsonb cannot hold", () => {
    const order = { agent_id: "agt_1", tool: "create_order", args: { amount: 100, currency: "INR" } };
    expect(batchable(order)).toBe(true);
    expect(batchable({ ...order, args: { ...order.args, idempotency_key: "k-1" } })).toBe(true);
    expect(batchable({ ...order, args: "not an object" })).toBe(true);
    expect(batchable({ ...order, agent_id: null })).toBe(false);
    expect(batchable({ ...order, tool: "capture_payment" })).toBe(false);
    expect(batchable({ ...order, args: { ...order.args, idempotency_key: "lone \ud800 surrogate" } })).toBe(false);
    expect(batchable({ ...order, args: { ...order.args, notes: { memo: "lone \udc00 surrogate" } } })).toBe(false);
    expect(batchable({ ...order, args: { ...order.args, amount: Infinity } })).toBe(false);
  });
});

// A connection that breaks during COMMIT while another transaction holds one of the batch's
// blocks cannot be arranged on a real server at a chosen moment; the queue is given a batch
// that reports both. (test/postgres/commit-unknown.test.ts cuts a real COMMIT for one call.)
describe("DecisionQueue", () => {
  const result = (name: string) => ({ name }) as unknown as AuthorizeResult;
  const call = (name: string): AuthorizeInput => ({ agent_id: "agt_1", tool: "create_order", args: { name } });
  const nameOf = (input: AuthorizeInput) => (input.args as { name: string }).name;
  /** A batch runner whose first batch leaves out the call at `skipped` (its block held elsewhere) and fails with `error`; later batches decide every call. */
  const firstBatchFails = (batches: string[][], skipped: number, error: Error) => async (inputs: AuthorizeInput[], options: BatchOptions) => {
    batches.push(inputs.map(nameOf));
    if (batches.length === 1) {
      options.skipped?.add(skipped);
      throw error;
    }
    return inputs.map((input) => result(nameOf(input)));
  };

  it("gives the commit-outcome-unknown error only to the calls its batch decided; the others go to the next batch", async () => {
    const batches: string[][] = [];
    const queue = new DecisionQueue(
      // "b" is left out.
      firstBatchFails(batches, 1, new CommitOutcomeUnknownError("the connection broke during COMMIT")),
      async () => {
        throw new Error("not decided one by one");
      },
    );
    const [a, b] = await Promise.allSettled(["a", "b"].map((name) => queue.decide(call(name))));
    expect(a).toMatchObject({ status: "rejected", reason: { code: "commit_outcome_unknown" } });
    expect(b).toEqual({ status: "fulfilled", value: result("b") });
    expect(batches).toEqual([["a", "b"], ["b"]]);
  });

  it("after a batch that waited out statement_timeout on a held block, fails only the calls it waited for; the others go to the next batch", async () => {
    const batches: string[][] = [];
    const timed_out = Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
    let c: Promise<AuthorizeResult> | undefined;
    const byAgent = (name: string): AuthorizeInput => ({ ...call(name), agent_id: `agt_${name}` });
    const queue = new DecisionQueue(
      async (inputs, options) => {
        batches.push(inputs.map(nameOf));
        // The first batch leaves "a" out (its block is held elsewhere) while "c" arrives; the
        // second waits for a's block until the statement times out.
        if (batches.length === 1) {
          c = queue.decide(byAgent("c"));
          return [null, result("b")];
        }
        if (batches.length === 2) {
          options.waiting_on?.add("agt_a");
          throw timed_out;
        }
        return inputs.map((input) => result(nameOf(input)));
      },
      async () => {
        throw new Error("not decided one by one: each would wait out the timeout again");
      },
      // Of the agents it waited for, a's block is still held by the other session.
      async (agents) => new Set(agents.filter((agent) => agent === "agt_a")),
    );
    const [a, b] = await Promise.allSettled(["a", "b"].map((name) => queue.decide(byAgent(name))));
    expect(a).toMatchObject({ status: "rejected", reason: { code: "57014" } });
    expect(b).toEqual({ status: "fulfilled", value: result("b") });
    expect(await c).toEqual(result("c"));
    expect(batches).toEqual([["a", "b"], ["a", "c"], ["c"]]);
  });

  it("leaves a rolled-back batch's skipped calls to the next batch instead of deciding each alone behind its held block", async () => {
    const batches: string[][] = [];
    const alone: string[] = [];
    const queue = new DecisionQueue(
      // "a" is left out.
      firstBatchFails(batches, 0, new Error("b's own statement failed")),
      async (input) => {
        alone.push(nameOf(input));
        return result(nameOf(input));
      },
    );
    const decided = await Promise.all(["a", "b"].map((name) => queue.decide(call(name))));
    expect(decided).toEqual([result("a"), result("b")]);
    expect(alone).toEqual(["b"]);
    expect(batches).toEqual([["a", "b"], ["a"]]);
  });

  it("once a batch has waited past stall_ms for a held block, decides the calls queued behind it on other blocks beside it; its agent's later call still waits behind it", async () => {
    const batches: string[][] = [];
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const of = (agent_id: string, name: string): AuthorizeInput => ({ ...call(name), agent_id });
    const overflow_waits: boolean[] = [];
    const queue = new DecisionQueue(
      async (inputs, options) => {
        batches.push(inputs.map(nameOf));
        // x's block is held elsewhere: the batch holding x1 waits for it.
        if (inputs.some((input) => nameOf(input) === "x1")) await held;
        else overflow_waits.push(options.wait_if_all_held ?? true);
        return inputs.map((input) => result(nameOf(input)));
      },
      async () => {
        throw new Error("not decided one by one");
      },
      undefined,
      20,
    );
    const answered: string[] = [];
    const x1 = queue.decide(of("agt_x", "x1")).then((value) => (answered.push("x1"), value));
    await new Promise((resolve) => setImmediate(resolve));
    const x2 = queue.decide(of("agt_x", "x2")).then((value) => (answered.push("x2"), value));
    // With one batch at a time, y waited behind x1's for as long as x's block was held.
    expect(await queue.decide(of("agt_y", "y1"))).toEqual(result("y1"));
    expect(await queue.decide(of("agt_z", "z1"))).toEqual(result("z1"));
    expect(answered).toEqual([]);
    release();
    expect(await Promise.all([x1, x2])).toEqual([result("x1"), result("x2")]);
    expect(answered).toEqual(["x1", "x2"]);
    expect(batches).toEqual([["x1"], ["y1"], ["z1"], ["x2"]]);
    // The overflow batches never wait for a block.
    expect(overflow_waits.slice(0, 2)).toEqual([false, false]);
  });

  it("decides a rolled-back batch's calls one by one, one agent's in order, another agent's without waiting behind them", async () => {
    const order: string[] = [];
    let release_a: () => void = () => undefined;
    const a_blocked = new Promise<void>((resolve) => (release_a = resolve));
    const queue = new DecisionQueue(
      async () => {
        throw new Error("a constraint failed for one call");
      },
      async (input) => {
        const name = nameOf(input);
        if (name === "a1") await a_blocked; // agent A's block is held: its first call waits
        order.push(name);
        return result(name);
      },
    );
    const of = (agent_id: string, name: string): AuthorizeInput => ({ ...call(name), agent_id });
    const decided = [queue.decide(of("agt_a", "a1")), queue.decide(of("agt_a", "a2")), queue.decide(of("agt_b", "b1"))];
    expect(await decided[2]).toEqual(result("b1"));
    expect(order).toEqual(["b1"]);
    release_a();
    expect(await Promise.all(decided)).toEqual([result("a1"), result("a2"), result("b1")]);
    expect(order).toEqual(["b1", "a1", "a2"]);
  });
});

interface World {
  bursar: Bursar;
  clock: ManualClock;
  url: string;
  agents: string[];
  drop(): Promise<void>;
}

/** A fresh schema with four agents: a tight block, a roomy one, none, and a revoked one. */
async function world(batch_decisions: boolean): Promise<World> {
  const schema = await freshSchema(pg_server as string);
  const clock = manualClock();
  const bursar = await createBursar({ db: schema.url, signingKey, clock, ids: sequentialIds(), pg_batch_decisions: batch_decisions });
  const agents: string[] = [];
  for (const name of ["tight", "roomy", "blockless", "revoked"]) agents.push((await bursar.operator.createAgent({ name })).agent_id);
  const [tight, roomy, , revoked] = agents as [string, string, string, string];
  await bursar.operator.createBlock({
    agent_id: tight,
    currency: "INR",
    reserved: 10_000,
    per_call_cap: 5_000,
    approval_threshold: 3_000,
    velocity: { max_calls: 6, window_seconds: 60 },
  });
  await bursar.operator.createBlock({ agent_id: roomy, currency: "INR", reserved: 1_000_000, approval_threshold: 50_000, velocity: { max_calls: 100 } });
  const gone = await bursar.operator.createBlock({ agent_id: revoked, currency: "INR", reserved: 50_000 });
  await bursar.operator.revoke(gone.block_id);
  return {
    bursar,
    clock,
    url: schema.url,
    agents,
    drop: async () => {
      await bursar.close();
      await schema.drop();
    },
  };
}

/** Every row that a decision writes or reads, in a stable order. */
async function contents(bursar: Bursar): Promise<Record<string, unknown[]>> {
  return bursar.driver.read(async (tx) => ({
    log: await tx.all("SELECT seq, kind, entry_text, leaf_hash, receipt_signature FROM log_entries ORDER BY seq"),
    blocks: await tx.all("SELECT * FROM blocks ORDER BY block_id"),
    reservations: await tx.all("SELECT * FROM reservations ORDER BY reservation_id"),
    keys: await tx.all("SELECT * FROM idempotency_keys ORDER BY agent_id, key"),
    approvals: await tx.all("SELECT * FROM approvals ORDER BY approval_id"),
    calls: await tx.all("SELECT agent_id, at_ms, n FROM money_calls ORDER BY agent_id, n"),
  }));
}

const call = fc.record({
  agent: fc.nat({ max: 3 }),
  amount: fc.constantFrom(100, 2_500, 3_500, 6_000),
  currency: fc.constantFrom("INR", "inr", "USD"),
  key: fc.constantFrom(undefined, "k1", "k2", "k3"),
  stray: fc.boolean(),
});

function input(agents: string[], drawn: { agent: number; amount: number; currency: string; key: string | undefined; stray: boolean }): AuthorizeInput {
  const args: Record<string, unknown> = { amount: drawn.amount, currency: drawn.currency };
  if (drawn.key !== undefined) args.idempotency_key = drawn.key;
  if (drawn.stray) args.transfers = [{ account: "acc_x", amount: drawn.amount }];
  return { agent_id: agents[drawn.agent] as string, tool: "create_order", args };
}

function summary(result: AuthorizeResult) {
  return { verdict: result.verdict, reservation: result.reservation?.reservation_id ?? null, held: result.block?.held ?? null, seq: result.evidence?.seq };
}

describe.skipIf(!pg_server)("batched decisions on PostgreSQL", () => {
  it("count an agent's calls in its velocity window only up to its block's max_calls", async () => {
    const w = await world(true);
    try {
      const tight = w.agents[0] as string;
      const rules = [];
      for (let call = 0; call < 20; call++) {
        const args = { amount: 100, currency: "INR", idempotency_key: `velocity-${call}` };
        const decided = await w.bursar.ledger.authorize({ agent_id: tight, tool: "create_order", args });
        rules.push(decided.verdict.rule);
      }
      expect(rules).toEqual([...Array<string>(6).fill("ALLOW"), ...Array<string>(14).fill("R6")]);
      const block_id = (await w.bursar.ledger.agentBlock(tight))?.block_id as string;
      const state = await w.bursar.driver.transaction(async (tx) => {
        const block = await lockBlock(tx, block_id);
        return readState(tx, new Map([[tight, block!]]), [], w.clock().getTime());
      });
      expect([...state.calls]).toEqual([[tight, 6]]);
    } finally {
      await w.drop();
    }
  });

  it("decide exactly as the same calls one after another: verdicts, rows and the evidence log byte for byte", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(call, { minLength: 1, maxLength: decision_batch_max }), { minLength: 1, maxLength: 3 }),
        async (batches) => {
          const serial = await world(false);
          const batched = await world(true);
          try {
            expect(batched.agents).toEqual(serial.agents);
            for (const drawn of batches) {
              const inputs = drawn.map((one) => input(serial.agents, one));
              const one_by_one: AuthorizeResult[] = [];
              for (const each of inputs) one_by_one.push(await serial.bursar.ledger.authorize(each));
              // Called in one turn of the event loop: they are decided in one batch.
              const together = await Promise.all(inputs.map((each) => batched.bursar.ledger.authorize(each)));
              expect(together.map(summary)).toEqual(one_by_one.map(summary));
            }
            expect(await contents(batched.bursar)).toEqual(await contents(serial.bursar));
          } finally {
            await Promise.all([serial.drop(), batched.drop()]);
          }
        },
      ),
      // A failing run fails at once: shrinking it rebuilt two schemas a step, past the timeout.
      { numRuns: 12, endOnFailure: true },
    );
  }, 240_000);

  describe("around other transactions", () => {
    let shared: World;
    beforeAll(async () => {
      shared = await world(true);
    });
    afterAll(async () => {
      await shared?.drop();
    });

    /**
     * Another session holds the tight agent's block while the tight agent's call is decided, then
     * `meanwhile` runs; the holder commits when it returns (or after 10 s, so that a call stuck
     * behind the held block still ends, as a failed expectation rather than a hang).
     */
    async function whileTightBlockHeld(key: string, meanwhile: (tight_call: { done: boolean }) => Promise<void>): Promise<AuthorizeResult> {
      const tight = shared.agents[0] as string;
      const holder = new pg.Client({ connectionString: shared.url });
      await holder.connect();
      try {
        await holder.query("BEGIN");
        await holder.query("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [(await shared.bursar.ledger.agentBlock(tight))?.block_id]);
        const tight_call = { done: false };
        const waiting = shared.bursar.ledger.authorize({ agent_id: tight, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: key } });
        void waiting.then(() => (tight_call.done = true));
        const released = setTimeout(() => void holder.query("COMMIT"), 10_000);
        try {
          await meanwhile(tight_call);
        } finally {
          clearTimeout(released);
        }
        await holder.query("COMMIT");
        return await waiting;
      } finally {
        await holder.end();
      }
    }

    const roomyOrder = (key: string) =>
      shared.bursar.ledger.authorize({ agent_id: shared.agents[1] as string, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: key } });

    it("decide calls on free blocks while another transaction holds one block, and the held block's call after it commits", async () => {
      let free: AuthorizeResult | undefined;
      const held = await whileTightBlockHeld("held-1", async (tight_call) => {
        free = await roomyOrder("free-1");
        expect(free.verdict.effect).toBe("ALLOW");
        expect(tight_call.done).toBe(false);
      });
      expect(held.verdict.effect).toBe("ALLOW");
      expect(held.evidence?.seq).toBeGreaterThan(free?.evidence?.seq as number);
    });

    it("decide a later call on a free block while an earlier call, alone in its batch, waits for its held block", async () => {
      const held = await whileTightBlockHeld("alone-held-1", async (tight_call) => {
        // Its batch is under way, alone: every block it needs is held, so it waits for them.
        await new Promise((resolve) => setTimeout(resolve, 50));
        // Before, this call waited behind that batch until the holder ended (or statement_timeout).
        expect((await roomyOrder("alone-free-1")).verdict.effect).toBe("ALLOW");
        expect(tight_call.done).toBe(false);
      });
      expect(held.verdict.effect).toBe("ALLOW");
    });

    it("make a skipped call's next batch wait for that call's block only, and skip another held block again", async () => {
      const [tight, roomy, , revoked] = shared.agents as [string, string, string, string];
      const block_of = async (agent_id: string) => (await shared.bursar.ledger.agentBlock(agent_id))?.block_id;
      const holders = [new pg.Client({ connectionString: shared.url }), new pg.Client({ connectionString: shared.url })] as const;
      const [tight_holder, roomy_holder] = holders;
      await Promise.all(holders.map((holder) => holder.connect()));
      try {
        for (const [holder, agent_id] of [[tight_holder, tight], [roomy_holder, roomy]] as const) {
          await holder.query("BEGIN");
          await holder.query("SELECT 1 FROM blocks WHERE block_id = $1 FOR UPDATE", [await block_of(agent_id)]);
        }
        const order = (agent_id: string, key: string) =>
          shared.bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: key } });
        // Batch 1 locks the revoked agent's free block and skips tight's call.
        const tight_call = order(tight, "only-own-block-tight");
        const revoked_call = order(revoked, "only-own-block-revoked");
        await new Promise((resolve) => setImmediate(resolve));
        // Made while batch 1 runs: batch 2 has tight's skipped call and this one.
        let roomy_done = false;
        const roomy_call = order(roomy, "only-own-block-roomy");
        void roomy_call.then(() => (roomy_done = true));
        expect((await revoked_call).verdict.effect).toBe("BLOCK");
        await tight_holder.query("COMMIT");
        // Batch 2 waited for tight's block alone: roomy's, still held, was skipped again. Had
        // it waited for every block, tight's call would wait for the roomy holder below.
        const released = setTimeout(() => void roomy_holder.query("COMMIT"), 10_000);
        const tight_result = await tight_call;
        clearTimeout(released);
        expect(tight_result.verdict.effect).toBe("ALLOW");
        expect(roomy_done).toBe(false);
        await roomy_holder.query("COMMIT");
        expect((await roomy_call).verdict.effect).toBe("ALLOW");
      } finally {
        await Promise.all(holders.map((holder) => holder.end()));
      }
    });

    it("decide each call on its own when their batch fails, and the failed batch leaves nothing behind", async () => {
      const { bursar, agents } = shared;
      const roomy = agents[1] as string;
      const before = (await bursar.ledger.agentBlock(roomy))?.held as number;
      let refused = 0;
      const evidence: EvidenceWriter = {
        append: (tx, entry) => bursar.log.append(tx, entry),
        appendMany: async (tx, entries, options) => {
          if (entries.length > 1) {
            refused++;
            throw new Error("the log refuses batches in this test");
          }
          return bursar.log.appendMany(tx, entries, options);
        },
      };
      const ledger = new Ledger(bursar.driver, { ...bursar.ledger.context, evidence });
      const results = await Promise.all(
        [1, 2, 3].map((n) => ledger.authorize({ agent_id: roomy, tool: "create_order", args: { amount: 1_000, currency: "INR", idempotency_key: `fallback-${n}` } })),
      );
      expect(refused).toBe(1);
      expect(results.map((result) => result.verdict.effect)).toEqual(["ALLOW", "ALLOW", "ALLOW"]);
      const seqs = results.map((result) => result.evidence?.seq as number);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(results.every((result) => (result.evidence?.seq ?? -1) > 0)).toBe(true);
      expect((await bursar.ledger.agentBlock(roomy))?.held).toBe(before + 3_000);
    });

    it("refuse a stored integer past 2^53 instead of rounding it, as one decision does", async () => {
      const { bursar, agents } = shared;
      const roomy = agents[1] as string;
      const block_id = (await bursar.ledger.agentBlock(roomy))?.block_id;
      await bursar.driver.transaction((tx) => tx.run("UPDATE blocks SET unreconciled = 1152921504606846976 WHERE block_id = ?", [block_id as string]));
      try {
        const call = bursar.ledger.authorize({ agent_id: roomy, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: "huge-1" } });
        await expect(call).rejects.toThrow(/not a safe integer/);
      } finally {
        await bursar.driver.transaction((tx) => tx.run("UPDATE blocks SET unreconciled = 0 WHERE block_id = ?", [block_id as string]));
      }
    });
  });

  it("expire more leases in one batch than one append takes, and decide the call in that batch", async () => {
    const schema = await freshSchema(pg_server as string);
    const clock = manualClock();
    const bursar = await createBursar({ db: schema.url, signingKey, clock, ids: sequentialIds() });
    try {
      const { agent_id } = await bursar.operator.createAgent({ name: "busy" });
      await bursar.operator.createBlock({ agent_id, currency: "INR", reserved: 1_000_000, velocity: { max_calls: 10_000, window_seconds: 60 } });
      const leases = append_batch_max + 10;
      for (let start = 0; start < leases; start += decision_batch_max) {
        const count = Math.min(decision_batch_max, leases - start);
        await Promise.all(
          Array.from({ length: count }, (_, index) =>
            bursar.ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: `lease-${start + index}` } }),
          ),
        );
      }
      clock.advance(bursar.ledger.context.lease_ms + 1_000);
      const appended: number[] = [];
      const evidence: EvidenceWriter = {
        append: (tx, entry) => bursar.log.append(tx, entry),
        appendMany: async (tx, entries, options) => {
          appended.push(entries.length);
          return bursar.log.appendMany(tx, entries, options);
        },
      };
      const ledger = new Ledger(bursar.driver, { ...bursar.ledger.context, evidence });
      const result = await ledger.authorize({ agent_id, tool: "create_order", args: { amount: 100, currency: "INR", idempotency_key: "after" } });
      expect(result.verdict.effect).toBe("ALLOW");
      // One entry per expired lease, then the decision: in chunks the log accepts, in one batch.
      expect(appended).toEqual([append_batch_max, leases + 1 - append_batch_max]);
      expect((await bursar.ledger.inbox()).unknown_outcomes.length).toBeGreaterThan(0);
    } finally {
      await bursar.close();
      await schema.drop();
    }
  }, 60_000);
});
