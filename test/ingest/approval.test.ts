// Approval verification compares names as people read them: an approver whose id or email reads
// as the agent's (fullwidth, a zero-width character inside, NFD against NFC, case, spaces) is the
// agent, and one that names nobody once blanks and invisible characters are gone is nobody. Each
// such case has a clean twin, a real different human, who stays verified.

import { describe, expect, it } from "vitest";
import type { DecisionRecord } from "../../src/ingest/schema.js";
import { approvalVerified, comparableName } from "../../src/ingest/validate.js";

type Principal = NonNullable<DecisionRecord["approver"]>;

const approve = (agent: Omit<Principal, "type">, approver: Omit<Principal, "type">): DecisionRecord => ({
  schema: "bursar.gateway-decision/1",
  event_id: "evt_approval",
  occurred_at: "2026-10-09T14:03:11Z",
  decision: "approve",
  tool: "github/create_release",
  args: {},
  agent: { ...agent, type: "agent" },
  approver: { ...approver, type: "human" },
});

const bot = { id: "bot" };

// [what the case is, the agent, the approver, verified]
const cases: Array<[string, Omit<Principal, "type">, Omit<Principal, "type">, boolean]> = [
  ["an id of spaces only names nobody", bot, { id: "   " }, false],
  ["  its twin: a real name", bot, { id: "alice" }, true],
  ["an id of other blanks only (tab, no-break, ideographic space) names nobody", bot, { id: "\t\u00a0\u3000" }, false],
  ["an id of invisible characters only (zero-width space, word joiner, BOM, Hangul filler) names nobody", bot, { id: "\u200b\u2060\ufeff\u3164" }, false],
  ["  its twin: the same with a letter", bot, { id: "\u200bx" }, true],
  ["a zero-width space inside the agent's id is the agent", bot, { id: "bo\u200bt" }, false],
  ["  its twin: another name with one", bot, { id: "bo\u200bb" }, true],
  ["a soft hyphen inside the agent's id is the agent", bot, { id: "b\u00adot" }, false],
  ["a right-to-left mark around the agent's id is the agent", bot, { id: "\u200fbot\u200e" }, false],
  ["the agent's id in fullwidth letters is the agent", bot, { id: "ｂｏｔ" }, false],
  ["  its twin: another name in fullwidth letters", bot, { id: "ｂｏｂ" }, true],
  ["the agent's id in capitals with spaces around is the agent", bot, { id: " BOT " }, false],
  ["the agent's id with a space inside is the agent", bot, { id: "b ot" }, false],
  ["NFD against the agent's NFC is the agent", { id: "caf\u00e9" }, { id: "cafe\u0301" }, false],
  // Either of two names is enough: an approver is the agent when any of its names is the agent's.
  ["an approver of another id with the agent's email is the agent", { id: "bot", email: "bot@acme.com" }, { id: "alice", email: "bot@acme.com" }, false],
  ["an approver of the agent's id with another email is the agent", { id: "bot", email: "bot@acme.com" }, { id: "bot", email: "alice@acme.com" }, false],
  ["  their twin: both names another's", { id: "bot", email: "bot@acme.com" }, { id: "alice", email: "alice@acme.com" }, true],
  ["NFC against the agent's NFD is the agent", { id: "cafe\u0301" }, { id: "caf\u00e9" }, false],
  ["  their twin: the name without its accent is another", { id: "caf\u00e9" }, { id: "cafe" }, true],
  ["sharp s against SS is the agent (case folding)", { id: "stra\u00dfe" }, { id: "STRASSE" }, false],
  ["the agent's email in fullwidth capitals is the agent", { email: "bot@acme.com" }, { email: "ＢＯＴ＠acme.com" }, false],
  ["  its twin: another person's email", { email: "bot@acme.com" }, { email: "lead@acme.com" }, true],
  ["a blank id beside a real email names the email's owner", bot, { id: "  ", email: "lead@acme.com" }, true],
  ["a blank id beside the agent's email is the agent", { id: "bot", email: "bot@acme.com" }, { id: "  ", email: "bot@acme.com" }, false],
  ["an agent whose id names nobody gives nothing to tell the approver from", { id: "\u200b " }, { id: "alice" }, false],
  ["  its twin: an agent with a real id", { id: "bot-1" }, { id: "alice" }, true],
];

describe("approval verification compares names as they read", () => {
  it.each(cases)("%s", (_what, agent, approver, verified) => {
    expect(approvalVerified(approve(agent, approver))).toBe(verified);
  });

  it("names nothing with what shows as nothing, and keeps what shows", () => {
    expect(comparableName(" \u200b\ufeff ")).toBeUndefined();
    expect(comparableName(undefined)).toBeUndefined();
    expect(comparableName(" Ｂｏ\u200bT ")).toBe("bot");
    // Look-alikes from another script are not matched (that would take Unicode's confusables data).
    expect(comparableName("b\u043et")).not.toBe(comparableName("bot"));
  });
});
