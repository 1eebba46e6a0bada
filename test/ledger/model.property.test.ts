// Model-based property test: random sequences of authorize / complete / settle / release /
// revoke / deny / unknown against a simple model. The model predicts every verdict (ALLOW,
// HOLD, R4, R0, R5, R1) and when each approval expires, by its own reckoning; balances always
// match it, the invariant spent + held <= reserved always holds, and settlement applies
// exactly once.
// Runs on SQLite and on PostgreSQL (each run on a fresh schema, so fewer runs there).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backends } from "../support/backends.js";
import { backendLedger, type TestLedger } from "../support/ledger.js";

interface ModelReservation {
  reservation_id: string;
  key: string;
  amount: number;
  status: "held" | "committed" | "released";
  order_id: string | null;
  in_flight: boolean;
  approval_id: string | null;
  /** When the model expects the approval to expire (its lifetime after the HOLD). */
  approval_expires_at_ms: number | null;
  /** The amount its capture settled, once committed. */
  captured_amount: number | null;
}

interface Model {
  reserved: number;
  spent: number;
  held: number;
  revoked: boolean;
  /** A settlement was rejected: the block froze. */
  frozen: boolean;
  reservations: ModelReservation[];
}

type Op =
  | { kind: "order"; amount: number }
  | { kind: "complete"; pick: number; outcome: "ok" | "refused" | "unknown" }
  | { kind: "settle"; pick: number; fraction: number; twice: boolean }
  | { kind: "deny"; pick: number }
  | { kind: "revoke" }
  | { kind: "tick"; seconds: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("order" as const), amount: fc.integer({ min: 50, max: 400_000 }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("complete" as const),
      pick: fc.nat(),
      outcome: fc.constantFrom("ok" as const, "refused" as const, "unknown" as const),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant("settle" as const), pick: fc.nat(), fraction: fc.oneof(fc.constant(1), fc.double({ min: 0.1, max: 1, noNaN: true })), twice: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("deny" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "revoke" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("tick" as const), seconds: fc.integer({ min: 1, max: 120 }) }) },
);

let order_counter = 0;

const block_limits = { reserved: 1_000_000, per_call_cap: 500_000, approval_threshold: 300_000 } as const;

/** The verdict the rules give, in their order: R4 (revoked or frozen), R0 (below 100), R5, R1, HOLD. */
function expectedVerdict(model: Model, amount: number): string {
  if (model.revoked || model.frozen) return "R4";
  if (amount < 100) return "R0";
  if (amount > block_limits.per_call_cap) return "R5";
  if (amount > model.reserved - model.spent - model.held) return "R1";
  if (amount > block_limits.approval_threshold) return "HOLD";
  return "ALLOW";
}

async function applyOrder(t: TestLedger, model: Model, amount: number): Promise<void> {
  const result = await t.order({ amount, currency: "INR", idempotency_key: `p-${++order_counter}` });
  expect(result.verdict.rule, `amount ${amount}`).toBe(expectedVerdict(model, amount));
  if (result.verdict.effect === "BLOCK") return;
  model.held += amount;
  model.reservations.push({
    reservation_id: result.reservation?.reservation_id as string,
    key: result.key?.key as string,
    amount,
    status: "held",
    order_id: null,
    in_flight: result.verdict.effect === "ALLOW",
    approval_id: result.approval?.approval_id ?? null,
    approval_expires_at_ms: result.verdict.effect === "HOLD" ? t.clock().getTime() + t.bursar.ledger.context.approval_lifetime_ms : null,
    captured_amount: null,
  });
}

async function applyComplete(t: TestLedger, model: Model, target: ModelReservation, outcome: "ok" | "refused" | "unknown") {
  if (!target.in_flight) return;
  target.in_flight = false;
  const order_id = `order_P${++order_counter}`;
  const forward =
    outcome === "ok"
      ? { kind: "ok" as const, value: { id: order_id, amount: target.amount, currency: "INR", status: "created" } }
      : outcome === "refused"
        ? { kind: "refused" as const, status: 400, error: { code: "BAD_REQUEST_ERROR", description: "no" } }
        : { kind: "unknown" as const, reason: "timeout" };
  await t.bursar.ledger.completeOrder({ agent_id: t.agent_id, key: target.key, reservation_id: target.reservation_id }, forward);
  if (outcome === "ok") target.order_id = order_id;
  if (outcome === "refused" && target.status === "held") {
    target.status = "released";
    model.held -= target.amount;
  }
}

async function applySettle(t: TestLedger, model: Model, target: ModelReservation, fraction: number, twice: boolean) {
  if (!target.order_id) return;
  const amount = Math.max(100, Math.floor(target.amount * fraction));
  const payment = { id: `pay_${target.order_id.slice(6)}`, order_id: target.order_id, amount, currency: "INR", status: "captured" };
  const first = await t.bursar.ledger.settle(payment, "webhook");
  // The settled payment again: a no-op with the amount it settled; with another, a conflict that freezes the block.
  const again = amount === target.captured_amount ? "noop" : "rejected";
  // A capture is for exactly the reservation's amount (no partial payments): one for less is a conflict.
  const on_hold = amount === target.amount ? "applied" : "rejected";
  const expected = target.status === "held" ? on_hold : target.status === "committed" ? again : "rejected";
  expect(first.outcome).toBe(expected);
  if (expected === "applied") {
    target.status = "committed";
    target.captured_amount = amount;
    model.held -= target.amount;
    model.spent += amount;
  }
  if (expected === "rejected") model.frozen = true;
  if (twice) expect((await t.bursar.ledger.settle(payment, "capture")).outcome).toBe(expected === "rejected" ? "rejected" : "noop");
}

async function applyDeny(t: TestLedger, model: Model, target: ModelReservation) {
  if (!target.approval_id || target.status !== "held") return;
  const approval = await t.bursar.ledger.approval(target.approval_id);
  if (approval?.state !== "pending") return;
  await t.bursar.ledger.deny(target.approval_id);
  target.status = "released";
  model.held -= target.amount;
}

async function applyRevoke(t: TestLedger, model: Model) {
  await t.bursar.operator.revoke(t.block_id);
  model.revoked = true;
  for (const target of model.reservations) {
    if (target.approval_id && target.status === "held") {
      target.status = "released";
      model.held -= target.amount;
    }
  }
}

/** Releases, by the model's own clock, the approvals whose lifetime is over, and checks that
 *  the ledger's state of every approval still waiting agrees. */
async function expireApprovals(t: TestLedger, model: Model) {
  const now_ms = t.clock().getTime();
  for (const target of model.reservations) {
    if (!target.approval_id || target.status !== "held") continue;
    const due = now_ms >= (target.approval_expires_at_ms as number);
    if (due) {
      target.status = "released";
      model.held -= target.amount;
    }
    expect((await t.bursar.ledger.approval(target.approval_id))?.state).toBe(due ? "expired" : "pending");
  }
}

/** Runs per backend: every PostgreSQL run migrates a fresh schema (about a quarter second). */
const runs = { sqlite: 150, postgres: 30 } as const;

for (const backend of backends()) {
  describe(`ledger model (${backend.name})`, () => {
    it("balances match the model and spent + held <= reserved after every step", async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), async (ops) => {
          const t = await backendLedger(backend, { ...block_limits, velocity: { max_calls: 1000, window_seconds: 60 } });
          const model: Model = { reserved: block_limits.reserved, spent: 0, held: 0, revoked: false, frozen: false, reservations: [] };
          try {
            for (const step of ops) {
              const target = model.reservations.length > 0 && "pick" in step ? model.reservations[step.pick % model.reservations.length] : undefined;
              if (step.kind === "order") await applyOrder(t, model, step.amount);
              else if (step.kind === "complete" && target) await applyComplete(t, model, target, step.outcome);
              else if (step.kind === "settle" && target) await applySettle(t, model, target, step.fraction, step.twice);
              else if (step.kind === "deny" && target) await applyDeny(t, model, target);
              else if (step.kind === "revoke") await applyRevoke(t, model);
              else if (step.kind === "tick") t.clock.advance(step.seconds * 1000);
              // Approvals may expire as time passes; the ledger releases them on its next decision or sweep.
              await t.bursar.ledger.sweep();
              await expireApprovals(t, model);
              const block = await t.bursar.ledger.getBlock(t.block_id);
              expect({ spent: block.spent, held: block.held }).toEqual({ spent: model.spent, held: model.held });
              expect(block.spent + block.held).toBeLessThanOrEqual(block.reserved);
              expect(block.spent).toBeGreaterThanOrEqual(0);
              expect(block.held).toBeGreaterThanOrEqual(0);
            }
          } finally {
            await t.bursar.close();
          }
        }),
        { numRuns: runs[backend.name] },
      );
    });
  });
}
