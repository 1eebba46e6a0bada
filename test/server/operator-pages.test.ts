// GET /api/v1/approvals pages by keyset (created_at_ms, then approval_id byte by byte): a walk
// sees each approval once, in order, also while approvals are created and decided meanwhile, and
// says when it is done; bad `state`, `limit` and `after` are refused with 422 naming them. The
// inbox says how many of each list there are and whether it cut one. On SQLite and PostgreSQL.

import type { FastifyInstance } from "fastify";
import { describe, expect, it } from "vitest";
import { OperatorTokens } from "../../src/datadir.js";
import { approvals_page_max, inbox_approvals_max, inbox_frozen_blocks_max, inbox_reservations_per_block, inbox_unknown_outcomes_max } from "../../src/ledger/ledger.js";
import type { ApprovalRow } from "../../src/ledger/rows.js";
import { buildServer } from "../../src/server/app.js";
import { operatorRoutes } from "../../src/server/routes/operator.js";
import { backends, closeAfterTest } from "../support/backends.js";
import { backendLedger, fresh, type TestLedger } from "../support/ledger.js";

const token = "test-operator-token-pages";
const created_per_tick = 10;

interface Page {
  approvals: ApprovalRow[];
  next_cursor: string | null;
}

interface InboxBody {
  pending_approvals: ApprovalRow[];
  pending_approvals_total: number;
  unknown_outcomes: Array<{ reservation_id: string }>;
  unknown_outcomes_total: number;
  frozen_blocks: Array<{ block: { block_id: string }; reservations: unknown[] }>;
  frozen_blocks_total: number;
  truncated: boolean;
}

async function operatorApp(t: TestLedger): Promise<FastifyInstance> {
  const access = { operator: OperatorTokens.fromToken(token), ledger: t.bursar.ledger };
  const app = await buildServer({ logger: false, plugins: [operatorRoutes(access, t.bursar.gate.gateContext)] });
  closeAfterTest(app);
  return app;
}

async function get<T>(app: FastifyInstance, url: string): Promise<{ status: number; body: T }> {
  const response = await app.inject({ method: "GET", url, headers: { authorization: `Bearer ${token}` } });
  return { status: response.statusCode, body: response.json() as T };
}

/** `count` held calls, created_per_tick at a time under one clock reading: many share a created_at_ms. */
async function holdCalls(t: TestLedger, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let made = 0; made < count; made += created_per_tick) {
    const batch = Array.from({ length: Math.min(created_per_tick, count - made) }, () => t.order(fresh({ amount: 1_000, currency: "INR" })));
    for (const held of await Promise.all(batch)) {
      expect(held.verdict.effect).toBe("HOLD");
      ids.push(held.approval?.approval_id as string);
    }
    t.clock.advance(1);
  }
  return ids;
}

/** Byte order of ASCII ids, as SQLite's BINARY and PostgreSQL's "C" collation compare them. */
const byBytes = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const oldestFirst = (a: ApprovalRow, b: ApprovalRow): number => Number(a.created_at_ms) - Number(b.created_at_ms) || byBytes(a.approval_id, b.approval_id);

async function rowsInState(t: TestLedger, state?: string): Promise<ApprovalRow[]> {
  const rows = await t.bursar.driver.read((tx) =>
    state ? tx.all<ApprovalRow>("SELECT * FROM approvals WHERE state = ?", [state]) : tx.all<ApprovalRow>("SELECT * FROM approvals"),
  );
  return rows.sort(oldestFirst);
}

/** Walks a listing page by page; `between` runs after each page. Stops loudly if it never ends. */
async function walk(app: FastifyInstance, query: string, between: (page: number) => Promise<void> = async () => undefined): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = null;
  do {
    const after: string = cursor === null ? "" : `&after=${encodeURIComponent(cursor)}`;
    const page: { status: number; body: Page } = await get<Page>(app, `/api/v1/approvals?${query}${after}`);
    expect(page.status).toBe(200);
    pages.push(page.body);
    cursor = page.body.next_cursor;
    await between(pages.length);
    expect(pages.length, "the walk ends").toBeLessThan(1_000);
  } while (cursor !== null);
  return pages;
}

const ids = (pages: Page[]): string[] => pages.flatMap((page) => page.approvals.map((row) => row.approval_id));

for (const backend of backends()) {
  describe(backend.name, () => {
    const ledger = () => backendLedger(backend, { approval_threshold: 0 });

    describe("GET /api/v1/approvals pages", () => {
      it("a walk of 610 pending approvals by 37 sees each once, oldest first with ties by id, and its last cursor is null", async () => {
        const t = await ledger();
        const made = await holdCalls(t, 610);
        const app = await operatorApp(t);
        // 37 is prime to the 10 rows created per millisecond: most pages end inside a tie.
        const pages = await walk(app, "state=pending&limit=37");
        expect(pages.map((page) => page.approvals.length)).toEqual([...Array<number>(16).fill(37), 18]);
        expect(pages.slice(0, -1).every((page) => typeof page.next_cursor === "string")).toBe(true);
        const walked = ids(pages);
        expect(new Set(walked).size).toBe(610);
        expect(walked).toEqual((await rowsInState(t, "pending")).map((row) => row.approval_id));
        expect([...walked].sort()).toEqual([...made].sort());
      });

      it("without limit a page holds 500, as the list did before it paged; a page that ends the list exactly has a null cursor", async () => {
        const t = await ledger();
        await holdCalls(t, 610);
        const app = await operatorApp(t);
        const first = await get<Page>(app, "/api/v1/approvals?state=pending");
        expect(first.body.approvals).toHaveLength(approvals_page_max);
        const rest = await get<Page>(app, `/api/v1/approvals?state=pending&after=${first.body.next_cursor}`);
        expect(rest.body.approvals).toHaveLength(110);
        expect(rest.body.next_cursor).toBeNull();
        expect((await walk(app, "state=pending&limit=305")).map((page) => [page.approvals.length, page.next_cursor === null])).toEqual([
          [305, false],
          [305, true],
        ]);
        expect((await get<Page>(app, "/api/v1/approvals?state=expired")).body).toEqual({ approvals: [], next_cursor: null });
      });

      it("stays stable while approvals are created and decided: each row seen at most once, none that stayed pending missed", async () => {
        const t = await ledger();
        const before = await holdCalls(t, 120);
        const app = await operatorApp(t);
        const denied: string[] = [];
        const added: string[] = [];
        const pages = await walk(app, "state=pending&limit=25", async (page) => {
          if (page > 3) return;
          // Created now (later than every row so far), and the newest not-yet-walked row denied.
          added.push(...(await holdCalls(t, 7)));
          const newest = (await rowsInState(t, "pending")).at(-1 - added.length) as ApprovalRow;
          await t.bursar.ledger.deny(newest.approval_id);
          denied.push(newest.approval_id);
        });
        const walked = ids(pages);
        expect(new Set(walked).size).toBe(walked.length);
        expect(walked.filter((id) => denied.includes(id))).toEqual([]);
        const stayed = before.filter((id) => !denied.includes(id));
        for (const id of [...stayed, ...added]) expect(walked).toContain(id);
        expect(walked).toHaveLength(stayed.length + added.length);
        expect(walked).toEqual((await rowsInState(t, "pending")).map((row) => row.approval_id));
      });

      it("without state, every approval newest first, each once", async () => {
        const t = await ledger();
        const made = await holdCalls(t, 130);
        for (const id of made.slice(0, 40)) await t.bursar.ledger.deny(id);
        const app = await operatorApp(t);
        const walked = ids(await walk(app, "limit=50"));
        expect(walked).toEqual((await rowsInState(t)).reverse().map((row) => row.approval_id));
        expect(walked).toHaveLength(130);
      });

      it("orders rows created in the same millisecond by id byte by byte on both backends", async () => {
        const t = await ledger();
        const [held] = await holdCalls(t, 1);
        const same_ms = Date.parse("2026-11-30T10:00:00.500Z");
        const made = ["apr_b", "apr_B", "apr_a", "apr_C", "apr_0", "apr_Z"];
        // A database whose text sorts by a language's rules (en-US puts apr_a before apr_B): the
        // test server's is C.UTF-8, under which byte order would hold without COLLATE "C".
        if (backend.name === "postgres") {
          await t.bursar.driver.transaction((tx) => tx.run('ALTER TABLE approvals ALTER COLUMN approval_id TYPE text COLLATE "en-US-x-icu"'));
        }
        await t.bursar.driver.transaction(async (tx) => {
          for (const approval_id of made) {
            const reservation_id = `res_${approval_id}`;
            await tx.run(
              `INSERT INTO reservations (reservation_id, block_id, agent_id, amount, currency, status, outcome_unknown, created_at_ms, updated_at_ms)
               VALUES (?, ?, ?, 1000, 'INR', 'held', 0, ?, ?)`,
              [reservation_id, t.block_id, t.agent_id, same_ms, same_ms],
            );
            await tx.run(
              `INSERT INTO approvals (approval_id, reservation_id, agent_id, block_id, idempotency_key, tool, args_json, state, created_at_ms, expires_at_ms)
               VALUES (?, ?, ?, ?, ?, 'create_order', '{}', 'pending', ?, ?)`,
              [approval_id, reservation_id, t.agent_id, t.block_id, `key-${approval_id}`, same_ms, same_ms + 60_000],
            );
          }
        });
        const app = await operatorApp(t);
        expect(ids(await walk(app, "state=pending&limit=2"))).toEqual([held, "apr_0", "apr_B", "apr_C", "apr_Z", "apr_a", "apr_b"]);
        expect(ids(await walk(app, "limit=4"))).toEqual(["apr_b", "apr_a", "apr_Z", "apr_C", "apr_B", "apr_0", held]);
      });
    });

    describe("GET /api/v1/approvals refuses bad parameters", () => {
      it("422 invalid_query naming state, limit (with its limit) or after", async () => {
        const t = await ledger();
        await holdCalls(t, 3);
        const app = await operatorApp(t);
        const pending_cursor = (await get<Page>(app, "/api/v1/approvals?state=pending&limit=1")).body.next_cursor as string;
        const encoded = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
        const cases: Array<[string, string]> = [
          ["state=bogus", "state"],
          ["state=", "state"],
          ["state=pending&state=denied", "state"],
          ["limit=0", "limit"],
          ["limit=501", "limit"],
          ["limit=-1", "limit"],
          ["limit=1.5", "limit"],
          ["limit=abc", "limit"],
          ["limit=", "limit"],
          ["limit=010", "limit"],
          ["limit=1&limit=2", "limit"],
          ["limit=99999999999999999999", "limit"],
          ["state=pending&after=", "after"],
          ["state=pending&after=not!base64", "after"],
          ["state=pending&after=bm90IGpzb24", "after"],
          [`state=pending&after=${"A".repeat(257)}`, "after"],
          [`state=pending&after=${encoded({ created_at_ms: 1, approval_id: "apr_1" })}`, "after"],
          [`state=pending&after=${encoded(["pending", "1", "apr_1"])}`, "after"],
          [`state=pending&after=${encoded(["pending", 1.5, "apr_1"])}`, "after"],
          [`state=pending&after=${encoded(["pending", 1, "apr_\u0000"])}`, "after"],
          [`state=pending&after=${encoded(["pending", 1, "apr 1"])}`, "after"],
          [`state=pending&after=${encoded(["bogus", 1, "apr_1"])}`, "after"],
          [`state=denied&after=${pending_cursor}`, "after"],
          [`after=${pending_cursor}`, "after"],
          [`state=pending&after=${pending_cursor}&after=${pending_cursor}`, "after"],
          // A parameter the route does not take, misspelt or not: it listed every approval.
          ["status=pending", "status"],
          ["state=pending&agent_id=agt_1", "agent_id"],
        ];
        for (const [query, param] of cases) {
          const answer = await get<{ error: { code: string; message: string; details: { param: string; limit?: number } } }>(app, `/api/v1/approvals?${query}`);
          expect(answer.status, query).toBe(422);
          expect(answer.body.error.code, query).toBe("invalid_query");
          expect(answer.body.error.details.param, query).toBe(param);
          expect(answer.body.error.message.startsWith(`${param} `), query).toBe(true);
          if (param === "limit") expect(answer.body.error.details.limit, query).toBe(approvals_page_max);
        }
        const other_listing = await get<{ error: { message: string } }>(app, `/api/v1/approvals?state=denied&after=${pending_cursor}`);
        expect(other_listing.body.error.message).toBe("after continues the listing of state=pending, not of state=denied");
        // As docs/gate.md shows it.
        expect((await get(app, "/api/v1/approvals?state=pending&limit=1000")).body).toEqual({
          error: { code: "invalid_query", message: `limit must be an integer from 1 to ${approvals_page_max}`, details: { param: "limit", limit: approvals_page_max } },
        });
        // limit at both ends of its range is accepted.
        expect((await get<Page>(app, "/api/v1/approvals?state=pending&limit=1")).body.approvals).toHaveLength(1);
        expect((await get<Page>(app, `/api/v1/approvals?state=pending&limit=${approvals_page_max}`)).body.approvals).toHaveLength(3);
      });
    });

    describe("GET /api/v1/inbox", () => {
      it("lists everything and says truncated: false when every list fits", async () => {
        const t = await ledger();
        await holdCalls(t, 3);
        const inbox = (await get<InboxBody>(await operatorApp(t), "/api/v1/inbox")).body;
        expect(inbox).toMatchObject({ pending_approvals_total: 3, unknown_outcomes_total: 0, frozen_blocks_total: 0, truncated: false });
        expect(inbox.pending_approvals).toHaveLength(3);
        // The amount and currency the held call would move, as fields (numbers on both backends).
        for (const approval of inbox.pending_approvals) expect(approval).toMatchObject({ amount: 1_000, currency: "INR" });
        const listed = (await get<Page>(await operatorApp(t), "/api/v1/approvals?state=pending")).body.approvals;
        for (const approval of listed) expect(approval).toMatchObject({ amount: 1_000, currency: "INR" });
      });

      it("cuts each list at its limit, gives its total and says truncated: true", async () => {
        const t = await ledger();
        await holdCalls(t, inbox_approvals_max + 10);
        const unknown_count = inbox_unknown_outcomes_max + 1;
        const frozen_count = inbox_frozen_blocks_max + 1;
        const now_ms = t.clock().getTime();
        await t.bursar.driver.transaction(async (tx) => {
          for (let index = 0; index < unknown_count; index++) {
            await tx.run(
              `INSERT INTO reservations (reservation_id, block_id, agent_id, amount, currency, status, outcome_unknown, unknown_reason, created_at_ms, updated_at_ms)
               VALUES (?, ?, ?, 100, 'INR', 'held', 1, 'timeout', ?, ?)`,
              [`res_unknown_${String(index).padStart(4, "0")}`, t.block_id, t.agent_id, now_ms, now_ms],
            );
          }
          for (let index = 0; index < frozen_count; index++) {
            await tx.run(
              `INSERT INTO blocks (block_id, agent_id, currency, reserved, per_call_cap, approval_threshold, velocity_max_calls, velocity_window_seconds,
                 created_at_ms, expires_at_ms, frozen_at_ms, freeze_reason)
               VALUES (?, ?, 'INR', 1000, 1000, 0, 10, 60, ?, ?, ?, 'test')`,
              [`blk_frozen_${String(index).padStart(4, "0")}`, t.agent_id, now_ms - 1_000, now_ms - 1, now_ms - (index % 7)],
            );
          }
        });
        const app = await operatorApp(t);
        const inbox = (await get<InboxBody>(app, "/api/v1/inbox")).body;
        expect(inbox).toMatchObject({
          pending_approvals_total: inbox_approvals_max + 10,
          unknown_outcomes_total: unknown_count,
          frozen_blocks_total: frozen_count,
          truncated: true,
        });
        expect(inbox.pending_approvals).toHaveLength(inbox_approvals_max);
        expect(inbox.unknown_outcomes).toHaveLength(inbox_unknown_outcomes_max);
        expect(inbox.frozen_blocks).toHaveLength(inbox_frozen_blocks_max);
        // The inbox's pending list is the first page of the pending walk, which goes on from there.
        const first = await get<Page>(app, `/api/v1/approvals?state=pending&limit=${inbox_approvals_max}`);
        expect(inbox.pending_approvals.map((row) => row.approval_id)).toEqual(first.body.approvals.map((row) => row.approval_id));
        // Ties by id: the first 500 of the 501 unknown outcomes created in one millisecond.
        expect(inbox.unknown_outcomes.at(-1)?.reservation_id).toBe("res_unknown_0499");
      });

      it("shows a frozen block with its latest 20 reservations, newest first (DESIGN.md)", async () => {
        const t = await ledger();
        const now_ms = t.clock().getTime();
        await t.bursar.driver.transaction(async (tx) => {
          for (let index = 0; index < inbox_reservations_per_block + 5; index++) {
            await tx.run(
              `INSERT INTO reservations (reservation_id, block_id, agent_id, amount, currency, status, outcome_unknown, created_at_ms, updated_at_ms)
               VALUES (?, ?, ?, 100, 'INR', 'released', 0, ?, ?)`,
              [`res_frozen_${String(index).padStart(4, "0")}`, t.block_id, t.agent_id, now_ms - 1_000 + index, now_ms - 1_000 + index],
            );
          }
          await tx.run("UPDATE blocks SET frozen_at_ms = ?, freeze_reason = 'test' WHERE block_id = ?", [now_ms, t.block_id]);
        });
        const inbox = (await get<InboxBody>(await operatorApp(t), "/api/v1/inbox")).body;
        expect(inbox.frozen_blocks).toHaveLength(1);
        const shown = (inbox.frozen_blocks[0] as unknown as { reservations: Array<{ reservation_id: string }> }).reservations.map((row) => row.reservation_id);
        expect(inbox_reservations_per_block).toBe(20);
        expect(shown).toEqual(Array.from({ length: 20 }, (_, i) => `res_frozen_${String(24 - i).padStart(4, "0")}`));
      });
    });
  });
}
