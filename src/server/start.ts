// Starting `bursar serve`: configuration, the data directory, the library, the provider (the
// mounted simulator by default), every route, and the timers that cut checkpoints and expire
// leases and approvals.

import type { FastifyInstance } from "fastify";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { createBursar, type Bursar } from "../index.js";
import { ConfigError, databaseError, fileError, maskedDb, type Config } from "../config.js";
import { data_dir_secret_files, lastCheckpointPath } from "../data-files.js";
import {
  ensureDataDir,
  exposedDataDirPaths,
  exposedPaths,
  OperatorTokens,
  removeAbandonedStagedFiles,
  randomSecret,
  secretFile,
  webhook_secret_file_name,
  type PendingOperatorToken,
} from "../datadir.js";
import { canonicalJson, fileWitness, ForeignSigningKeyError, resolveSigningKey, SigningKeyError, type CheckpointWitness, type LoadedSigningKey } from "../evidence/index.js";
import { rememberSecretValues } from "../evidence/scrub.js";
import { lostOrdersWarning, markLostOrders, mounted_simulator_stamp_prefix } from "../gate/lost-orders.js";
import type { KeyObject } from "node:crypto";
import { deferredProvider } from "../provider/deferred.js";
import type { Provider } from "../provider/port.js";
import { createRazorpayProvider } from "../provider/razorpay/index.js";
import { acceptOnlyKey, createSimulator, type Simulator } from "../provider/simulator/index.js";
import { master_key_file_name, MasterKeyError, resolveMasterKey } from "../sources/sealed.js";
import type { SourceStore } from "../sources/store.js";
import { buildServer, listenFailure, loggerOptions, type RoutePlugin } from "./app.js";
import { isReader, type Access } from "./auth.js";
import { mcpRoutes } from "./mcp.js";
import { createMetrics } from "./metrics.js";
import { logRoutes } from "./routes/log.js";
import { evidenceSources } from "./routes/evidence-sources.js";
import { operatorRoutes } from "./routes/operator.js";
import { webhookRoutes } from "./routes/webhooks.js";

export const maintenance_interval_ms = 1_000;
export const simulator_key_id = "rzp_test_bursarlocal";
/** A money call makes at most this many provider requests in a row (capture: fetch, capture, re-check). */
export const provider_requests_per_call_max = 3;
export const shutdown_margin_ms = 5_000;

/** Long enough for an in-flight money call's provider requests to time out on their own. */
export function shutdownGraceMs(provider_timeout_ms: number): number {
  return provider_requests_per_call_max * provider_timeout_ms + shutdown_margin_ms;
}

export interface Started {
  app: FastifyInstance;
  bursar: Bursar;
  url: string;
  operator: OperatorTokens;
  simulator?: Simulator;
  /** The operator token, when this start generated it (printed once, never stored). */
  generated_token?: string;
}

/** A digest of the configuration without its secrets, recorded in system.start. The database
 *  is hashed as shown (a postgres password masked): a digest of a URL with a password in it
 *  would let anyone who reads the log try passwords against it offline. */
export function configDigest(config: Config): string {
  const { admin_token: _a, master_key: _m, listen_names: _l, razorpay, db, ...rest } = config;
  const visible = { ...rest, db: maskedDb(db), razorpay: { key_id: razorpay.key_id ?? null, base_url: razorpay.base_url } };
  return createHash("sha256").update(canonicalJson(visible)).digest("hex");
}

interface ProviderSetup {
  provider: Provider;
  simulator?: Simulator;
  /** Called once the server listens at `url`. */
  bind(url: string): void;
}

function providerSetup(config: Config, webhook_secret_generated: string | undefined): ProviderSetup {
  if (config.provider === "razorpay") {
    const provider = createRazorpayProvider({
      key_id: config.razorpay.key_id as string,
      key_secret: config.razorpay.key_secret as string,
      base_url: config.razorpay.base_url,
      webhook_secret: config.razorpay.webhook_secret as string,
      ...(config.razorpay.webhook_secret_previous === undefined ? {} : { webhook_secret_previous: config.razorpay.webhook_secret_previous }),
      allow_live: config.allow_live,
      timeout_ms: config.provider_timeout_ms,
    });
    return { provider, bind: () => undefined };
  }
  const webhook_secret = config.razorpay.webhook_secret ?? (webhook_secret_generated as string);
  // The mounted API answers only the key generated here for Bursar's own client: anyone else who
  // reaches this port (an agent included) must not create or capture orders around the gate.
  const key_secret = randomSecret();
  const simulator = createSimulator({ webhook_secret, control_routes: false, accept_key: acceptOnlyKey(simulator_key_id, key_secret) });
  const provider = deferredProvider();
  return {
    provider,
    simulator,
    bind: (url) => {
      simulator.setWebhookUrl(`${url}/webhooks/razorpay`);
      provider.bind(
        createRazorpayProvider({
          key_id: simulator_key_id,
          key_secret,
          base_url: `${url}/simulator`,
          webhook_secret,
          timeout_ms: config.provider_timeout_ms,
        }),
      );
    },
  };
}

/** Every this many maintenance ticks, rotation answers past their replay window are erased. */
const rotation_sweep_every_ticks = 60;

function maintenance(bursar: Bursar, app: FastifyInstance): () => void {
  let running = false;
  let ticks = 0;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    const sweep_rotations = ++ticks % rotation_sweep_every_ticks === 0 ? sources_of.get(app)?.forgetExpiredRotationAnswers() : undefined;
    Promise.all([bursar.ledger.sweep(), bursar.log.tick(), sweep_rotations])
      .catch((error: unknown) => app.log.error({ err: { message: (error as Error).message } }, "maintenance failed"))
      .finally(() => {
        running = false;
      });
  }, maintenance_interval_ms);
  timer.unref();
  return () => clearInterval(timer);
}

/** What the start reads from or generates into the data directory, before anything else. */
interface DataDirSetup {
  tokens: OperatorTokens;
  pending?: PendingOperatorToken;
  signing_key: KeyObject;
  master_key: string;
  /** The data directory's master-key file the key came from (none: BURSAR_MASTER_KEY), and whether this start generated it. */
  master_key_file?: { path: string; created: boolean };
  webhook_secret?: string;
  /** The data directory's signing-key.pem, when this start generated it. */
  signing_key_created?: string;
  /** Secret files (BURSAR_SIGNING_KEY's too) or the data directory itself that group or others have access to. */
  exposed: string[];
}

function dataDirSetup(config: Config): DataDirSetup {
  const data_dir = config.data_dir;
  try {
    ensureDataDir(data_dir);
    removeAbandonedStagedFiles(data_dir);
    // The key first: a BURSAR_SIGNING_KEY the start refuses then leaves no secret of its own made.
    const loaded_key = signingKey(config);
    const signing_key = loaded_key.privateKey;
    const prepared = OperatorTokens.prepare(data_dir, config.admin_token);
    const pending = prepared.pending;
    const webhook_secret =
      config.provider === "simulator" && !config.razorpay.webhook_secret
        ? secretFile(data_dir, webhook_secret_file_name, randomSecret).value
        : undefined;
    const { key: master_key, file: master_key_file } = resolveMasterKey(config);
    const exposed = [...exposedDataDirPaths(data_dir, data_dir_secret_files), ...exposedPaths(config.signing_key_path ? [config.signing_key_path] : [])];
    const setup: DataDirSetup = { tokens: prepared.tokens, signing_key, master_key, exposed };
    if (loaded_key.created) setup.signing_key_created = loaded_key.path;
    if (master_key_file) setup.master_key_file = master_key_file;
    if (pending) setup.pending = pending;
    if (webhook_secret !== undefined) setup.webhook_secret = webhook_secret;
    return setup;
  } catch (error) {
    throw fileError(error, `BURSAR_DATA_DIR=${data_dir}`);
  }
}

/** The log's signing key; every error about BURSAR_SIGNING_KEY's file names the variable
 *  (resolveSigningKey's own, and any file system error, as fileError words it). */
function signingKey(config: Config): LoadedSigningKey {
  try {
    return resolveSigningKey({ explicitPath: config.signing_key_path, dataDir: config.data_dir, create: true });
  } catch (error) {
    throw config.signing_key_path ? fileError(error, `BURSAR_SIGNING_KEY=${config.signing_key_path}`) : error;
  }
}

/** The data directory's last-checkpoint file for BURSAR_DB; a write that fails is logged (by the server, once it exists). */
function checkpointWitness(path: string, server: () => FastifyInstance | undefined): CheckpointWitness {
  return fileWitness(path, (error) =>
    server()?.log.warn({ err: { message: (error as Error).message }, path }, "could not keep the newest checkpoint; the next one tries again (warned once until one is kept)"),
  );
}

/** Listen errors as one line naming BURSAR_HOST / BURSAR_PORT. */
async function listen(app: FastifyInstance, config: Config): Promise<void> {
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    const names = config.listen_names ?? { host: "BURSAR_HOST=", port: "BURSAR_PORT=" };
    const host = `${names.host}${config.host}`;
    const failure = listenFailure(error, { address: `${host} ${names.port}${config.port}`, host, who: "another bursar serve" });
    throw failure === undefined ? error : new ConfigError(failure);
  }
}

/** How far Bursar's clock may start ahead of the host's before the start says so. */
const clock_ahead_warning_ms = 1_000;

/** Said at the start when the log's newest entry (or the database's clock) is ahead of the host's clock. */
export function clockAheadWarning(ahead_ms: number): string {
  return `the clock starts ${Math.round(ahead_ms / 1000)} s ahead of this host's: the log's newest entry (or the database's clock) is later than the host's time, so Bursar's time stands still until the host's catches up; expiries, approval lifetimes, leases and velocity windows wait too (check the host's clock)`;
}

/** Said once at the start of a server whose database is BURSAR_DB=:memory:. */
export const memory_database_warning =
  "BURSAR_DB=:memory: blocks, holds and the evidence log live in this process only and are lost when it exits (set BURSAR_DB to a file or a postgres:// URL to keep them)";

export async function startServer(config: Config, options: { logger?: boolean } = {}): Promise<Started> {
  const files = dataDirSetup(config);
  let bursar: Bursar | undefined;
  let app: FastifyInstance | undefined;
  try {
    const setup = providerSetup(config, files.webhook_secret);
    // Redacted from evidence wherever they appear, whatever they look like (an agent could copy
    // a bare key secret into its notes; only secret-looking text matched before).
    rememberSecretValues([config.razorpay.key_secret, config.razorpay.webhook_secret, config.razorpay.webhook_secret_previous, files.webhook_secret, config.admin_token, files.master_key]);
    const metrics = createMetrics();
    // The newest checkpoint is kept in the data directory: a database restored from an older
    // copy, or replaced, no longer holds it, and the next start refuses (docs/configuration.md).
    const witness = config.db === ":memory:" ? undefined : checkpointWitness(lastCheckpointPath(config.data_dir, config.db), () => app);
    const opened = await createBursar({
      ...(witness ? { witness } : {}),
      db: config.db,
      pg_prepared_statements: config.pg_prepared_statements,
      provider: metrics.instrument(setup.provider),
      observer: metrics.observer,
      signingKey: files.signing_key,
      origin: config.log_origin,
      checkpoint_every: config.checkpoint_every,
      checkpoint_seconds: config.checkpoint_seconds,
      // A capture binds its payment, then may capture and re-fetch it, each up to the timeout, and
      // commit between: twice the timeout left no room, and a live capture's lease could run out.
      lease_ms: provider_requests_per_call_max * config.provider_timeout_ms,
      lookups_per_minute: config.lookups_per_minute,
      clock_from_host: config.clock_from_host,
    }).catch((error: unknown) => Promise.reject(databaseError(config.db, error)));
    bursar = opened;
    metrics.watchInbox(() => opened.ledger.inboxCounts());
    // Before listening: each order this process names is stamped with its provider, the mounted
    // simulator's with this process's own id, so that a later process can tell the orders that
    // simulator lost (src/gate/lost-orders.ts) from any other.
    const stamp = setup.simulator ? `${mounted_simulator_stamp_prefix}${randomSecret().slice(0, 16)}` : "razorpay";
    opened.ledger.context.order_made_by = stamp;
    if (setup.simulator) opened.gate.gateContext.mounted_simulator = { stamp };
    app = await serverOf(config, options, files, setup, metrics, opened);
    if (files.exposed.length > 0) app.log.warn({ paths: files.exposed }, "data directory or secret: group or others have access (expected mode 0700 for the directory, 0600 for secrets)");
    if (config.db === ":memory:") app.log.warn(memory_database_warning);
    const starts_at = opened.clock();
    const ahead_ms = starts_at.getTime() - Date.now();
    if (ahead_ms > clock_ahead_warning_ms) app.log.warn({ clock: starts_at.toISOString(), ahead_ms }, clockAheadWarning(ahead_ms));
    await listen(app, config);
    // The start's own writes (its system.start entry, the first sweep) meet the database's
    // failures as the opening did (a full disk): one line naming BURSAR_DB.
    return await running(app, config, files, setup, opened).catch((error: unknown) => Promise.reject(databaseError(config.db, error)));
  } catch (error) {
    if (app) await app.close().catch(() => undefined);
    else await bursar?.close().catch(() => undefined);
    // A key this start generated that the log refuses (it was started under another, whose file
    // is missing) is no one's: left there, the next start, and `bursar key`, would take it up.
    if (files.signing_key_created !== undefined && error instanceof SigningKeyError) {
      rmSync(files.signing_key_created, { force: true });
      // The key named is one the operator never had: say where it came from.
      if (error instanceof ForeignSigningKeyError) throw new SigningKeyError(`${files.signing_key_created} was missing, so this start made a new key, now removed again; ${error.message}`);
    }
    // Likewise a master key generated beside sealed secrets it cannot open (its file was lost).
    if (files.master_key_file?.created && error instanceof MasterKeyError) rmSync(files.master_key_file.path, { force: true });
    throw error;
  }
}

async function serverOf(
  config: Config,
  options: { logger?: boolean },
  files: DataDirSetup,
  setup: ProviderSetup,
  metrics: ReturnType<typeof createMetrics>,
  bursar: Bursar,
): Promise<FastifyInstance> {
  const access: Access = { operator: files.tokens, ledger: bursar.ledger };
  const gate_context = bursar.gate.gateContext;
  const plugins: RoutePlugin[] = [
    metrics.routes,
    mcpRoutes(access, bursar.gate),
    operatorRoutes(access, gate_context),
    webhookRoutes(gate_context),
    logRoutes({ log: bursar.log, authorizeReader: (header) => isReader(access, header) }),
  ];
  const evidence = evidenceSources({ access, bursar, master_key: files.master_key, onUnrecorded: metrics.evidenceGap });
  try {
    await refuseForeignMasterKey(evidence.sources, files);
    // The observer's run row exists before any call is taken in: one killed before its first
    // heartbeat is still found lost.
    await evidence.runs.begin();
  } catch (error) {
    await evidence.observer.close().catch(() => undefined);
    throw error;
  }
  plugins.push(...evidence.plugins);
  const simulator = setup.simulator;
  if (simulator) plugins.push(async (app) => void (await app.register(simulator.plugin, { prefix: "/simulator" })));
  const app = await buildServer({
    logger: options.logger === false ? false : loggerOptions(config.log_level),
    plugins,
    health: async () => {
      await bursar.ledger.driver.read((tx) => tx.get("SELECT 1 AS one FROM log_head LIMIT 1"));
    },
    shutdown_grace_ms: shutdownGraceMs(config.provider_timeout_ms),
    onClose: async () => {
      stops.get(app)?.();
      // A money call whose client went away is still under way: it ends, and is recorded, before
      // its provider (this simulator) and the database close. The stop's grace period bounds it.
      await bursar.gate.idle();
      await simulator?.close();
      // Kept in the data directory too: a database put back from a copy made before this stop
      // is then refused at the next start, whatever was written since the last timed checkpoint.
      await bursar.log.finalCheckpoint();
      await bursar.close();
    },
  });
  accesses.set(app, access);
  sources_of.set(app, evidence.sources);
  return app;
}

/**
 * The evidence sources' signing keys are sealed under the master key: one that does not open
 * them (BURSAR_MASTER_KEY changed, or the data directory's master-key lost and generated anew)
 * would fail every signed delivery later, so the start stops here, naming where the key came from.
 */
async function refuseForeignMasterKey(sources: SourceStore, files: DataDirSetup): Promise<void> {
  if (await sources.sealerOpensStoredKeys()) return;
  const file = files.master_key_file;
  const origin = !file ? "BURSAR_MASTER_KEY" : file.created ? `${file.path} (missing, so this start made a new one, now removed again)` : file.path;
  throw new MasterKeyError(
    `the master key from ${origin} does not open the evidence sources' signing keys stored in the database (sealed under another master key): restore the master key they were sealed under (BURSAR_MASTER_KEY, or the data directory's ${master_key_file_name} file from a backup); every instance sharing a database needs the same one; if it is lost for good, see "Master key" in docs/evidence-sources.md`,
  );
}

/** The maintenance timer's stop, and the routes' access (whose operator tokens the start may
 *  replace), per server. */
const stops = new WeakMap<FastifyInstance, () => void>();
const accesses = new WeakMap<FastifyInstance, Access>();
const sources_of = new WeakMap<FastifyInstance, SourceStore>();

function commitToken(pending: PendingOperatorToken, data_dir: string): ReturnType<PendingOperatorToken["commit"]> {
  try {
    return pending.commit();
  } catch (error) {
    throw fileError(error, `BURSAR_DATA_DIR=${data_dir}`);
  }
}

/**
 * A mounted simulator keeps its orders in memory only: holds on orders an earlier process's
 * mounted simulator made can never be paid or captured, whatever the provider now. Each is marked
 * outcome-unknown (so the inbox lists it) and one line says how many and what releases them.
 */
async function reportLostOrders(app: FastifyInstance, bursar: Bursar): Promise<void> {
  const marked = await markLostOrders(bursar.gate.gateContext);
  if (marked > 0) app.log.warn({ marked_unknown: marked }, lostOrdersWarning(marked));
}

/** After listening: bind the provider, record the start, and only then store a generated token. */
async function running(app: FastifyInstance, config: Config, files: DataDirSetup, setup: ProviderSetup, bursar: Bursar): Promise<Started> {
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  setup.bind(url);
  await bursar.log.recordStart(configDigest(config), config.provider);
  await bursar.ledger.sweep();
  await reportLostOrders(app, bursar);
  stops.set(app, maintenance(bursar, app));
  const started: Started = { app, bursar, url, operator: files.tokens };
  if (setup.simulator) started.simulator = setup.simulator;
  if (files.pending) {
    // The last step that can fail: from here on the token is printed, so its hash may be stored.
    const { tokens, shown } = commitToken(files.pending, config.data_dir);
    (accesses.get(app) as Access).operator = tokens;
    started.operator = tokens;
    if (shown) started.generated_token = shown;
    else app.log.warn("another process stored the operator token first: use the token it printed");
  }
  return started;
}
