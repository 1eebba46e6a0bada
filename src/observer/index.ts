// The chained observer: agent → their gateway → Bursar observer → their MCP server. It relays
// every byte untouched and writes each tools/call as an `observer.call` entry off the critical path.

import { Agent as HttpAgent, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Clock } from "../clock.js";
import { HttpError } from "../errors.js";
import { observer_cache_ttl_ms, observer_token_prefix, type ObserverSource, type SourceStore } from "../sources/store.js";
import { percentDecoded } from "../url-text.js";
import { callEvidence, Correlator } from "./calls.js";
import { HeldBytes, observer_token_header, relay, type RelayContext } from "./proxy.js";
import { Recorder, type EvidenceSink, type GapReason } from "./recorder.js";
import { run_heartbeat_ms, type ObserverRuns } from "./runs.js";

export { logSink, type CallCounts, type EvidenceSink, type GapReason } from "./recorder.js";
export { observer_lost_kind, observer_resumed_kind, ObserverRuns } from "./runs.js";
export { observer_token_header } from "./proxy.js";
export { shadow_settings_schema, shadowVerdict, type ShadowSettings } from "./shadow.js";

/**
 * Idle kept-alive upstream sockets kept per host. The number in use is not capped here: every
 * MCP session holds a GET stream open for its life, so a cap would queue new requests behind
 * streams that never end. In-use sockets are bounded by the observer's own open requests.
 */
export const upstream_sockets_idle_max = 256;

/** How often open exchanges' tokens are checked again and calls left unanswered past their time are recorded. */
export const observer_sweep_ms_default = observer_cache_ttl_ms;
/** Every this many sweeps (and at the first), runs of other processes that fell silent are looked for. */
export const lost_runs_every_sweeps = 6;

export interface ObserverOptions {
  sources: SourceStore;
  /** Default observer_sweep_ms_default. */
  sweep_ms?: number;
  /** How long a call may wait for its answer before it is recorded as a timeout; default pending_call_ttl_ms. */
  pending_call_ttl_ms?: number;
  sink: EvidenceSink;
  /** This process's run: its row shows it alive, and the sweep finds other runs that stopped unclean. */
  runs?: ObserverRuns;
  clock: Clock;
  queue_length_max?: number;
  retry_delay_ms?: number;
  onUnrecorded?: (calls: number, reason: GapReason) => void;
  onError?: (message: string) => void;
}

export interface ObserveTarget {
  source: ObserverSource;
  url: URL;
  /** The token that opened the source, checked again while its exchanges stay open. */
  token: string;
}

function stillBelow(pathname: string, base: string): boolean {
  return pathname === base || pathname.startsWith(`${base}/`);
}

/**
 * The upstream URL for a request path below /observe (`rest` starts with "/" or is empty). A
 * path that would leave the upstream URL's own path ("..", "%2e%2e" or "\\" segments, which the
 * URL parser resolves, or ones an upstream decoding "%2F" or "%5C", or dropping path parameters
 * (";…"), first would resolve) is refused: a token opens its upstream URL and what lies below it only.
 */
export function upstreamTarget(upstream: URL, rest: string, query: string): URL {
  // The common case (the token in a header, no path or query below /observe) is the upstream itself.
  if ((rest === "" || rest === "/") && query === "") return upstream;
  const target = new URL(upstream.href);
  if (rest !== "" && rest !== "/") {
    const base = target.pathname.replace(/\/+$/, "");
    target.pathname = base + rest;
    // An upstream that decodes %2F or %5C before it resolves dot segments would read "..%2f" as
    // "../", and one that drops a segment's path parameters (Tomcat, Jetty) "..;x" as "..": the
    // path must stay below base read those ways too.
    const read_as = /[%;]/.test(rest) ? rest.replace(/%2f|%5c/gi, "/").replace(/;[^/]*/g, "") : rest;
    const decoded = read_as === rest ? target.pathname : new URL(base + read_as, target.origin).pathname;
    if (!stillBelow(target.pathname, base) || !stillBelow(decoded, base)) {
      throw new HttpError(400, "path_outside_upstream", "the path below /observe may not leave the upstream URL's path (a \"..\" segment)");
    }
  }
  if (query !== "") target.search = query;
  return target;
}

/**
 * Splits `/observe[/{token}]/rest?query`: without the header, the first segment is the token.
 * The router reads the `observe` segment percent-decoded (`/%6Fbserve/…` routes here as well),
 * so what lies below it starts at the path's second "/", whatever that segment's spelling.
 * With it, a first segment shaped like an observer token is still taken as one and never
 * forwarded: the same token is dropped from the path, and a different one is refused (a gateway
 * that puts its token in the path and passes its clients' headers through would otherwise let
 * a client reroute the request with a token of its own, and send the gateway's to that upstream).
 */
export function tokenAndRest(url: string, header_token: string | undefined): { token: string | undefined; rest: string; query: string } {
  const query_at = url.indexOf("?");
  const path = query_at === -1 ? url : url.slice(0, query_at);
  const query = query_at === -1 ? "" : url.slice(query_at);
  const second_slash = path.indexOf("/", 1);
  const below = second_slash === -1 ? "" : path.slice(second_slash);
  const named = firstNamedSegment(below);
  const segment = named.text === undefined ? undefined : decodeURIComponent(named.text);
  const after = named.after;
  if (!header_token) return { token: segment, rest: forwardable(after), query };
  if (!segment?.startsWith(observer_token_prefix)) return { token: header_token, rest: forwardable(below), query };
  if (segment !== header_token) throw new HttpError(400, "token_conflict", `the ${observer_token_header} header and the path name different observer tokens`);
  return { token: header_token, rest: forwardable(after), query };
}

/**
 * The path below the token, refused when it still names an observer token however it is written
 * (`x/../{token}`, `..%2f{token}`, `bsr%5Fobs_…`): the upstream, or a server on the way that
 * decodes and resolves paths, would read one there, and no observer token is forwarded in a path.
 * (The URL parser drops tabs and line breaks from a path, as Node's HTTP parser refuses them.)
 */
function forwardable(rest: string): string {
  if (!percentDecoded(rest).replace(/[\t\r\n]/g, "").toLowerCase().includes(observer_token_prefix)) return rest;
  throw new HttpError(400, "token_in_path", "the path below /observe names an observer token (bsr_obs_…) past the token's own place: an observer token is never forwarded to the upstream");
}

/**
 * The first segment of a path below /observe that names something, and the path after it: empty
 * and "." segments before it are passed over, as the upstream URL's own resolution drops them
 * (`/observe/./{token}/mcp` would otherwise forward the token as the upstream path's first segment).
 */
function firstNamedSegment(below: string): { text: string | undefined; after: string } {
  for (let at = 0; below[at] === "/"; ) {
    const end = below.indexOf("/", at + 1);
    const text = below.slice(at + 1, end === -1 ? below.length : end);
    if (end === -1) return { text: text === "" ? undefined : text, after: "" };
    if (text !== "" && text !== "." && text.toLowerCase() !== "%2e") return { text, after: below.slice(end) };
    at = end;
  }
  return { text: undefined, after: "" };
}

export class Observer {
  private readonly context: RelayContext;
  readonly recorder: Recorder;
  readonly correlator: Correlator;
  /** The bytes the body taps of all open exchanges hold. */
  readonly held = new HeldBytes();
  private closing = false;
  private readonly sweeper: NodeJS.Timeout;
  private sweeping = false;
  /** The run bookkeeping in flight, apart from the sweep: a slow database delays neither. */
  private run_tick: Promise<void> | null = null;
  private run_ticks = 0;

  constructor(private readonly options: ObserverOptions) {
    this.recorder = new Recorder({ ...options, pendingCalls: () => this.correlator.size });
    this.correlator = new Correlator((call, reason) => {
      const evidence = callEvidence(call, { type: "no_response", reason }, call.started_ms, "none");
      this.recorder.enqueue(evidence.input, evidence.bytes, call.source.source_id);
    }, options.pending_call_ttl_ms);
    this.context = {
      clock: options.clock,
      correlator: this.correlator,
      recorder: this.recorder,
      held: this.held,
      agents: {
        http: new HttpAgent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: upstream_sockets_idle_max }),
        https: new HttpsAgent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: upstream_sockets_idle_max }),
      },
      active: new Map(),
      sockets: new Set(),
    };
    const sweep_ms = options.sweep_ms ?? observer_sweep_ms_default;
    // The heartbeat comes with the sweep, at least every run_heartbeat_ms: two must fit in the
    // time that makes a run lost, or an idle run would be taken for lost again and again.
    if (options.runs && 2 * (run_heartbeat_ms + sweep_ms) > options.runs.silent_ms_max) {
      throw new RangeError(`the runs' silent_ms_max must be at least twice (${run_heartbeat_ms} ms + sweep_ms)`);
    }
    this.sweeper = setInterval(() => {
      void this.sweep();
      this.runTick();
    }, sweep_ms);
    this.sweeper.unref();
  }

  /**
   * Records calls left unanswered past their time, even when no new call comes to do it, and
   * cuts the open exchanges of a token that no longer opens its source (the source disabled, or
   * the token past its rotation grace): its GET streams would otherwise relay on for ever. While
   * the database fails, open exchanges go on, as new requests with a known token do.
   */
  private async sweep(): Promise<void> {
    if (this.sweeping || this.closing) return;
    this.sweeping = true;
    try {
      this.correlator.expire(performance.now());
      // One look-up per token (null: it opens nothing now; undefined: the database failed).
      const opens = new Map<string, boolean>();
      for (const [cut, token] of [...this.context.active]) {
        if (!opens.has(token)) opens.set(token, (await this.options.sources.observerByToken(token).catch(() => undefined)) !== null);
        if (opens.get(token) === false && this.context.active.has(cut)) cut();
      }
    } finally {
      this.sweeping = false;
    }
  }

  /** Shows this run alive, and now and then ends other runs that fell silent, with their evidence. Never throws. */
  private runTick(): void {
    const runs = this.options.runs;
    if (!runs || this.run_tick || this.closing) return;
    const find = this.run_ticks++ % lost_runs_every_sweeps === 0;
    this.run_tick = (async () => {
      await runs.heartbeat(() => this.recorder.taken);
      if (find) await runs.findLost();
    })()
      .catch((error: unknown) => this.options.onError?.(`observer run bookkeeping failed: ${error instanceof Error ? error.message : String(error)}`))
      .finally(() => {
        this.run_tick = null;
      });
  }

  /** The source and upstream URL for a request, or a 401 (no token, or not a valid enabled observer's), or a 503 (a token not seen before while the database fails). */
  async target(url: string, header_token: string | undefined): Promise<ObserveTarget> {
    let parts: ReturnType<typeof tokenAndRest>;
    try {
      parts = tokenAndRest(url, header_token);
    } catch (error) {
      if (error instanceof HttpError) throw error;
      throw new HttpError(400, "malformed", "the observer path is not valid");
    }
    if (!parts.token) throw new HttpError(401, "unauthorized", `an observer token is required (${observer_token_header} or /observe/{token}/…)`);
    let source: ObserverSource | null;
    try {
      source = await this.options.sources.observerByToken(parts.token);
    } catch (error) {
      this.options.onError?.(`observer token lookup failed: ${error instanceof Error ? error.message : String(error)}`);
      throw new HttpError(503, "store_unavailable", "the observer token cannot be checked now; try again later");
    }
    if (!source) throw new HttpError(401, "unauthorized", "the observer token is not valid");
    return { source, url: upstreamTarget(source.upstream, parts.rest, parts.query), token: parts.token };
  }

  /** Called first for every observer request: remembers its connection, or cuts it when closing. */
  track(socket: Socket): void {
    if (this.closing) return void socket.destroy();
    if (this.context.sockets.has(socket)) return;
    this.context.sockets.add(socket);
    socket.once("close", () => this.context.sockets.delete(socket));
  }

  /** Exchanges being relayed now (what shutdown and the token sweep cut). */
  get exchanges_open(): number {
    return this.context.active.size;
  }

  /**
   * Relays a request, unless the observer is closing or the client left while its token was
   * looked up: its request and response then closed already, and no close event would ever come
   * to end an upstream request opened now (nor take its exchange out of the open ones).
   */
  relay(target: ObserveTarget, request: IncomingMessage, response: ServerResponse): void {
    if (this.closing || request.destroyed || response.destroyed) return void response.destroy();
    relay(this.context, target.source, target.token, request, response, target.url);
  }

  /**
   * Ends the run when every call taken has its entry; otherwise its row keeps the count of calls
   * taken, and the run is found lost later with the calls that have none.
   */
  private async endRun(): Promise<void> {
    const runs = this.options.runs;
    if (!runs) return;
    try {
      if (!(await runs.end(this.recorder.taken))) {
        this.options.onError?.("observer run left open: calls it took in have no entry, and another start will record them as lost");
      }
    } catch (error) {
      this.options.onError?.(`observer run could not be ended: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /**
   * Stops, while the evidence log is still open (the route closes the observer before the server's
   * own close shuts the database): every pending call is recorded now as no_response "shutdown",
   * synchronously, before open streams are cut (a cut exchange would settle its calls only in
   * later events, after the drain below looked); then the queue is drained (bounded).
   */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.closing = true;
    this.correlator.close();
    // GET streams never end by themselves, nor does a gateway's kept-alive connection.
    for (const destroy of [...this.context.active.keys()]) destroy();
    for (const socket of [...this.context.sockets]) socket.destroy();
    await this.recorder.close();
    // A heartbeat in flight would otherwise commit after the end, and open the row again.
    this.options.runs?.stop();
    await this.run_tick;
    await this.endRun();
    this.context.agents.http.destroy();
    this.context.agents.https.destroy();
  }
}
