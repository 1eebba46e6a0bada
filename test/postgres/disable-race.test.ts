// Disabling an agent on one instance while another grants its pending approval, on one
// PostgreSQL database: the grant either finishes first (its evidence before the disable's) or
// finds the agent disabled, and of two disables at once only the first is recorded.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKeyPem } from "../../src/evidence/index.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { freshSchema, postgresServerUrl } from "../support/backends.js";

const rounds = 25;
const pg_server = postgresServerUrl();

describe.skipIf(!pg_server)("agent disable against an approval, two instances", () => {
  let schema: Awaited<ReturnType<typeof freshSchema>> | undefined;
  const instances: Bursar[] = [];
  beforeAll(async () => {
    schema = await freshSchema(pg_server as string);
    const signingKey = generateSigningKeyPem();
    instances.push(await createBursar({ db: schema.url, signingKey }));
    instances.push(await createBursar({ db: schema.url, signingKey }));
  });
  afterAll(async () => {
    for (const instance of instances) await instance.close();
    await schema?.drop();
  });

  /** The seqs of gate.operator entries with this action naming this id. */
  async function seqsOf(action: string, field: string, id: string): Promise<number[]> {
    const rows = await instances[0]!.driver.read((tx) =>
      tx.all<{ seq: number | string; entry_text: string }>("SELECT seq, entry_text FROM log_entries WHERE kind = 'gate.operator' AND entry_text LIKE ? ORDER BY seq", [
        `%${id}%`,
      ]),
    );
    return rows
      .filter((row) => {
        const body = (JSON.parse(row.entry_text) as { body: Record<string, unknown> }).body;
        return body.action === action && body[field] === id;
      })
      .map((row) => Number(row.seq));
  }

  it("a grant is ordered before the disable or refused, and the disable is recorded once", async () => {
    const [a, b] = instances as [Bursar, Bursar];
    let granted = 0;
    for (let round = 0; round < rounds; round++) {
      const agent = await a.operator.createAgent({ name: `buyer-${round}` });
      await a.operator.createBlock({ agent_id: agent.agent_id, currency: "INR", reserved: 1_000_000, approval_threshold: 1_000 });
      const held = await a.ledger.authorize({ agent_id: agent.agent_id, tool: "create_order", args: { amount: 5_000, currency: "INR", idempotency_key: `k-${round}` } });
      const approval_id = held.approval?.approval_id as string;
      expect(approval_id).toBeDefined();
      const [grant] = await Promise.allSettled([a.ledger.beginApproval(approval_id), b.ledger.disableAgent(agent.agent_id), a.ledger.disableAgent(agent.agent_id)]);
      expect(grant.status).toBe("fulfilled");
      const disables = await seqsOf("agent.disable", "agent_id", agent.agent_id);
      expect(disables, `round ${round}: agent.disable entries`).toHaveLength(1);
      const approves = await seqsOf("approval.approve", "approval_id", approval_id);
      const outcome = (grant as PromiseFulfilledResult<Awaited<ReturnType<Bursar["ledger"]["beginApproval"]>>>).value;
      if ("refused" in outcome) {
        expect(outcome.refused).toBe("the agent is disabled");
        expect(approves).toEqual([]);
      } else {
        granted++;
        expect(approves).toHaveLength(1);
        expect(approves[0], `round ${round}: the grant's entry comes before the disable's`).toBeLessThan(disables[0]!);
      }
    }
    // Which one wins each round is up to the scheduler; the log says which, for the reader.
    console.log(`disable-race: ${granted} of ${rounds} grants finished before the disable`);
  });
});
