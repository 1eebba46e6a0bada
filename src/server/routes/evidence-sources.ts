// Wiring for evidence sources: the source store (secrets sealed under the master key), the
// operator routes, decision-record ingestion and the chained observer, as route plugins.

import type { Bursar } from "../../index.js";
import { logSink, Observer, ObserverRuns, type EvidenceSink, type GapReason } from "../../observer/index.js";
import { SecretSealer } from "../../sources/sealed.js";
import { SourceStore } from "../../sources/store.js";
import type { Clock } from "../../clock.js";
import type { RoutePlugin } from "../app.js";
import type { Access } from "../auth.js";
import { ingestRoutes } from "./ingest.js";
import { observeRoutes } from "./observe.js";
import { sourceRoutes } from "./sources.js";

export interface EvidenceSourceOptions {
  access: Access;
  bursar: Pick<Bursar, "driver" | "log" | "clock">;
  master_key: string;
  /** Default: the Bursar's own clock (on PostgreSQL the database's, so that every instance ends a
   *  rotated secret's grace, and checks a delivery's t=, at the same moment). */
  clock?: Clock;
  /** Where observed calls are written; default: the evidence log in its own transactions, with the run's counts
   *  (logSink with `runs`). Tests only: a sink that does not count them leaves every call unwritten in the run's row. */
  sink?: EvidenceSink;
  queue_length_max?: number;
  retry_delay_ms?: number;
  /** How often the observer records calls left unanswered and checks open exchanges' tokens again. */
  sweep_ms?: number;
  /** How long an observed call may wait for its answer before it is recorded as a timeout. */
  pending_call_ttl_ms?: number;
  /** Counts calls the observer could not record (bursar_evidence_gap_calls_total). */
  onUnrecorded?: (calls: number, reason: GapReason) => void;
  /** Operational messages from the observer's writer (never headers, args or results); default stderr. */
  onError?: (message: string) => void;
}

export interface EvidenceSources {
  sources: SourceStore;
  observer: Observer;
  /** This process's observer run (what shows it alive to other instances). */
  runs: ObserverRuns;
  plugins: RoutePlugin[];
}

export function evidenceSources(options: EvidenceSourceOptions): EvidenceSources {
  const { driver, log } = options.bursar;
  const clock = options.clock ?? options.bursar.clock;
  const sources = new SourceStore({ driver, log, sealer: new SecretSealer(options.master_key), clock });
  const runs = new ObserverRuns({ driver, log, clock });
  const observer = new Observer({
    sources,
    sink: options.sink ?? logSink(driver, log, runs),
    runs,
    clock,
    ...(options.queue_length_max === undefined ? {} : { queue_length_max: options.queue_length_max }),
    ...(options.retry_delay_ms === undefined ? {} : { retry_delay_ms: options.retry_delay_ms }),
    ...(options.sweep_ms === undefined ? {} : { sweep_ms: options.sweep_ms }),
    ...(options.pending_call_ttl_ms === undefined ? {} : { pending_call_ttl_ms: options.pending_call_ttl_ms }),
    ...(options.onUnrecorded ? { onUnrecorded: options.onUnrecorded } : {}),
    onError: options.onError ?? ((message) => process.stderr.write(`bursar observer: ${message}\n`)),
  });
  const plugins = [
    sourceRoutes(options.access, sources),
    ingestRoutes({ access: options.access, sources, ingest: { driver, log, clock }, clock }),
    observeRoutes(observer),
  ];
  return { sources, observer, runs, plugins };
}
