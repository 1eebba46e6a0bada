// What the gate reports for operations (metrics), kept free of any metrics library.

import type { Verdict } from "../policy/index.js";

export interface GateObserver {
  decision(tool: string, verdict: Verdict): void;
  providerCall(operation: string, outcome: "ok" | "refused" | "unknown", seconds: number): void;
  unknownOutcome(tool: string): void;
  webhook(outcome: string): void;
  /** A read tool answered rate_limited instead of asking the provider. */
  lookupLimited(tool: string): void;
}

export const silent_observer: GateObserver = {
  decision: () => undefined,
  providerCall: () => undefined,
  unknownOutcome: () => undefined,
  webhook: () => undefined,
  lookupLimited: () => undefined,
};
