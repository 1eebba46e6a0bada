// Starting `bursar serve`: configuration, the data directory, the library, the provider (the
// mounted simulator by default), every route, and the timers that cut checkpoints and expire
// leases and approvals.

import type { FastifyInstance } from "fastify";
import { createHash } from "node:crypto";
import { createBursar, type Bursar } from "../index.js";
import type { Config } from "../config.js";
import { ensureDataDir, OperatorTokens, randomSecret, secretFile } from "../datadir.js";
import { canonicalJson, resolveSigningKey } from "../evidence/index.js";
import { deferredProvider } from "../provider/deferred.js";
import type { Provider } from "../provider/port.js";
import { createRazorpayProvider } from "../provider/razorpay/index.js";
import { acceptOnlyKey, createSimulator, type Simulator } from "../provider/simulator/index.js";
import { resolveMasterKey } from "../sources/sealed.js";
import { buildServer, loggerOptions, type RoutePlugin } from "./app.js";
import { isReader, type Access } from "./auth.js";
import { mcpRoutes } from "./mcp.js";
import { createMetrics } from "./metrics.js";
import { logRoutes } from "./routes/log.js";
import { evidenceSources } from "./routes/evidence-sources.js";
import { operatorRoutes } from "./routes/operator.js";
import { webhookRoutes } from "./routes/webhooks.js";

export const maintenance_interval_ms = 1_000;
export const simulator_key_id = "rzp_test_bursarlocal";

export interface Started {
  app: FastifyInstance;
  bursar: Bursar;
  url: string;
  operator: OperatorTokens;
  simulator?: Simulator;
  /** The operator token, when this start generated it (printed once, never stored). */
  generated_token?: string;
}

/** A digest of the configuration without its secrets, recorded in system.start. */
export function configDigest(config: Config): string {
  const { admin_token: _a, master_key: _m, razorpay, ...rest } = config;
  const visible = { ...rest, razorpay: { key_id: razorpay.key_id ?? null, base_url: razorpay.base_url } };
  return createHash("sha256").update(canonicalJson(visible)).digest("hex");
}

interface ProviderSetup {
  provider: Provider;
  simulator?: Simulator;
  /** Called once the server listens at `url`. */
  bind(url: string): void;
}

function providerSetup(config: Config): ProviderSetup {
  if (config.provider === "razorpay") {
    const provider = createRazorpayProvider({
      key_id: config.razorpay.key_id as string,
      key_secret: config.razorpay.key_secret as string,
      base_url: config.razorpay.base_url,
      webhook_secret: config.razorpay.webhook_secret as string,
      allow_live: config.allow_live,
      timeout_ms: config.provider_timeout_ms,
    });
    return { provider, bind: () => undefined };
  }
  const webhook_secret = config.razorpay.webhook_secret ?? secretFile(config.data_dir, "webhook-secret", randomSecret).value;
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

function maintenance(bursar: Bursar, app: FastifyInstance): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    Promise.all([bursar.ledger.sweep(), bursar.log.tick()])
      .catch((error: unknown) => app.log.error({ err: { message: (error as Error).message } }, "maintenance failed"))
      .finally(() => {
        running = false;
      });
  }, maintenance_interval_ms);
  timer.unref();
  return () => clearInterval(timer);
}

export async function startServer(config: Config, options: { logger?: boolean } = {}): Promise<Started> {
  ensureDataDir(config.data_dir);
  const { tokens, generated } = OperatorTokens.load(config.data_dir, config.admin_token, true);
  const signing = resolveSigningKey({ explicitPath: config.signing_key_path, dataDir: config.data_dir, create: true });
  const setup = providerSetup(config);
  const metrics = createMetrics();
  const bursar = await createBursar({
    db: config.db,
    provider: metrics.instrument(setup.provider),
    observer: metrics.observer,
    signingKey: signing.privateKey,
    origin: config.log_origin,
    checkpoint_every: config.checkpoint_every,
    checkpoint_seconds: config.checkpoint_seconds,
    lease_ms: 2 * config.provider_timeout_ms,
  });
  const access: Access = { operator: tokens, ledger: bursar.ledger };
  const gate_context = bursar.gate.gateContext;
  const plugins: RoutePlugin[] = [
    metrics.routes,
    mcpRoutes(access, bursar.gate),
    operatorRoutes(access, gate_context),
    webhookRoutes(gate_context),
    logRoutes({ log: bursar.log, authorizeReader: (header) => isReader(access, header) }),
    ...evidenceSources({ access, bursar, master_key: resolveMasterKey(config), onUnrecorded: metrics.evidenceGap }).plugins,
  ];
  const simulator = setup.simulator;
  if (simulator) plugins.push(async (app) => void (await app.register(simulator.plugin, { prefix: "/simulator" })));
  let stopMaintenance = () => undefined as void;
  const app = await buildServer({
    logger: options.logger === false ? false : loggerOptions(),
    plugins,
    onClose: async () => {
      stopMaintenance();
      await simulator?.close();
      await bursar.close();
    },
  });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  setup.bind(url);
  await bursar.log.recordStart(configDigest(config));
  await bursar.ledger.sweep();
  stopMaintenance = maintenance(bursar, app);
  const started: Started = { app, bursar, url, operator: tokens };
  if (simulator) started.simulator = simulator;
  if (generated) started.generated_token = generated;
  return started;
}
