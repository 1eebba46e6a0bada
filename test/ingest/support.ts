// A real Bursar HTTP server for the ingestion and observer tests: SQLite file database, the
// evidence-source plugins wired exactly as `bursar serve` wires them, a hand-moved clock.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { OperatorTokens } from "../../src/datadir.js";
import type { StoredEntry } from "../../src/evidence/store.js";
import { createBursar, type Bursar } from "../../src/index.js";
import { signatureHeader } from "../../src/ingest/signature.js";
import { buildServer } from "../../src/server/app.js";
import { createMetrics, type Metrics } from "../../src/server/metrics.js";
import { evidenceSources, type EvidenceSourceOptions, type EvidenceSources } from "../../src/server/routes/evidence-sources.js";
import { logRoutes } from "../../src/server/routes/log.js";
import { manualClock, type ManualClock } from "../support/clock.js";

export const operator_token = "ingest-operator-token-0123456789";
export const master_key = "test-master-key-0123456789abcdef";

export interface Harness {
  url: string;
  dir: string;
  db: string;
  bursar: Bursar;
  clock: ManualClock;
  metrics: Metrics;
  evidence: EvidenceSources;
  app: FastifyInstance;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: T }>;
  /** Log entries of `kind` (all when omitted), oldest first. */
  entries(kind?: string): Promise<Array<{ seq: number; entry: Record<string, unknown> & { body: Record<string, unknown> } }>>;
  treeSize(): Promise<number>;
  close(): Promise<void>;
}

export type HarnessOptions = Partial<Pick<EvidenceSourceOptions, "sink" | "queue_length_max" | "retry_delay_ms" | "sweep_ms" | "pending_call_ttl_ms">>;

export async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), "bursar-sources-"));
  const db = join(dir, "bursar.db");
  const clock = manualClock(Date.now());
  const bursar = await createBursar({ db, clock });
  const metrics = createMetrics();
  const access = { operator: OperatorTokens.fromToken(operator_token), ledger: bursar.ledger };
  // No clock of its own: the sources read the Bursar's (here the hand-moved one), as `bursar serve`'s do.
  const evidence = evidenceSources({ access, bursar, master_key, onUnrecorded: metrics.evidenceGap, onError: () => undefined, ...options });
  const app = await buildServer({
    logger: false,
    plugins: [metrics.routes, logRoutes({ log: bursar.log, authorizeReader: async () => true }), ...evidence.plugins],
    onClose: () => bursar.close(),
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  const api = async <T>(method: string, path: string, body?: unknown, token = operator_token) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as T };
  };
  const treeSize = () => bursar.log.treeSize();
  const entries = async (kind?: string) => {
    // Every entry, page by page: a page holds at most 1,000, and fewer when they are large.
    const size = await treeSize();
    const all: StoredEntry[] = [];
    while (all.length < size) all.push(...(await bursar.log.entries(all.length, Math.min(size, all.length + 1000))));
    return all
      .filter((stored) => kind === undefined || stored.entry.kind === kind)
      .map((stored) => ({ seq: stored.seq, entry: stored.entry as unknown as Record<string, unknown> & { body: Record<string, unknown> } }));
  };
  return {
    url,
    dir,
    db,
    bursar,
    clock,
    metrics,
    evidence,
    app,
    api,
    entries,
    treeSize,
    async close() {
      const closing = app.close();
      // A kept-alive test connection that becomes idle after close began would hold it open.
      setTimeout(() => app.server.closeAllConnections(), 200).unref();
      await closing;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface DecisionsSource {
  id: string;
  signing_key: string;
  api_key: string;
  ingest_url: string;
}

export async function decisionsSource(h: Harness, name = "acme-gateway"): Promise<DecisionsSource> {
  const created = await h.api<DecisionsSource>("POST", "/api/v1/evidence-sources", { kind: "decisions", name });
  if (created.status !== 201) throw new Error(`source: ${JSON.stringify(created.body)}`);
  return created.body;
}

/** Every kind of id a caller can name on the ingest routes: a decisions source, another one, a
 *  disabled one and an observer's (its upstream a closed port). Names start with `prefix`. */
export async function sourceKinds(h: Harness, prefix: string): Promise<{ source: DecisionsSource; other: DecisionsSource; disabled: DecisionsSource; observer_id: string }> {
  const source = await decisionsSource(h, prefix);
  const other = await decisionsSource(h, `${prefix}-other`);
  const disabled = await decisionsSource(h, `${prefix}-disabled`);
  const disabling = await h.api("POST", `/api/v1/evidence-sources/${disabled.id}/disable`);
  if (disabling.status !== 200) throw new Error(`disable: ${JSON.stringify(disabling.body)}`);
  const observer = await h.api<{ id: string }>("POST", "/api/v1/evidence-sources", { kind: "observer", name: `${prefix}-observer`, upstream_url: "http://127.0.0.1:9/mcp" });
  if (observer.status !== 201) throw new Error(`observer source: ${JSON.stringify(observer.body)}`);
  return { source, other, disabled, observer_id: observer.body.id };
}

export function record(event_id: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema: "bursar.gateway-decision/1",
    event_id,
    occurred_at: "2026-10-09T14:03:11Z",
    decision: "allow",
    tool: "github/create_release",
    server: "github-mcp",
    args: { repo: "acme/api", tag: "v2.4.0" },
    agent: { id: "agent-release-bot", type: "agent" },
    ...fields,
  };
}

export function ndjson(records: readonly unknown[], newline = "\n"): string {
  return records.map((value) => JSON.stringify(value)).join(newline) + newline;
}

/** Posts a signed delivery to the webhook; `sign` false sends no signature header. */
export async function deliver(
  h: Harness,
  source: DecisionsSource,
  body: string | Buffer,
  options: { keys?: string[]; header?: string; at?: Date } = {},
): Promise<{ status: number; body: Record<string, any> }> {
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  const header = options.header ?? signatureHeader(options.keys ?? [source.signing_key], bytes, options.at ?? h.clock());
  const response = await fetch(`${h.url}/ingest/${source.id}`, {
    method: "POST",
    headers: { "content-type": "application/x-ndjson", "bursar-signature": header },
    body: new Uint8Array(bytes),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, any>) : {} };
}

/** The three ingest routes, by what authenticates them. */
export type IngestRoute = "webhook" | "events" | "upload";
export const ingest_routes: IngestRoute[] = ["webhook", "events", "upload"];

/** Posts `body` to `route` with its credential (the webhook's signature over the bytes as sent). */
export async function postDelivery(h: Harness, source: DecisionsSource, route: IngestRoute, body: Buffer, headers: Record<string, string> = {}) {
  const [path, credential] =
    route === "webhook"
      ? [`/ingest/${source.id}`, { "bursar-signature": signatureHeader([source.signing_key], body, h.clock()) }]
      : route === "events"
        ? [`/api/v1/evidence-sources/${source.id}/events`, { authorization: `Bearer ${source.api_key}` }]
        : [`/api/v1/evidence-sources/${source.id}/upload`, { authorization: `Bearer ${operator_token}` }];
  const response = await fetch(`${h.url}${path}`, { method: "POST", headers: { ...credential, ...headers }, body: new Uint8Array(body) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : {}) as Record<string, any> };
}
