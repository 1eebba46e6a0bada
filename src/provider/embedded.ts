// The simulator in-process: one fastify app (never listening) holds the simulator under
// /simulator and Bursar's webhook route; the Razorpay client reaches it through injectFetch,
// and the simulator delivers its signed webhooks back the same way.

import type { FastifyInstance } from "fastify";
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.js";
import type { WorkInFlight } from "../gate/context.js";
import type { Ledger } from "../ledger/index.js";
import { buildServer } from "../server/app.js";
import { webhookRoutes } from "../server/routes/webhooks.js";
import { injectFetch } from "./inject.js";
import type { Provider } from "./port.js";
import { createRazorpayProvider } from "./razorpay/index.js";
import { createSimulator, type Simulator } from "./simulator/index.js";

export const embedded_base_url = "http://bursar.embedded";

export interface EmbeddedSimulator {
  provider: Provider;
  simulator: Simulator;
  /** Signs the simulator's webhooks; tests and the eval harness sign their own with it. */
  webhook_secret: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

export async function embeddedSimulator(options: { clock: Clock; ids: () => string; ledger: Ledger; work: WorkInFlight }): Promise<EmbeddedSimulator> {
  const webhook_secret = randomBytes(32).toString("hex");
  let app: FastifyInstance | undefined;
  const fetch = injectFetch(() => {
    if (!app) throw new Error("the embedded simulator is not ready");
    return app;
  });
  const simulator = createSimulator({
    webhook_secret,
    webhook_url: `${embedded_base_url}/webhooks/razorpay`,
    clock: options.clock,
    ids: options.ids,
    fetch,
    webhook_retry_base_ms: 50,
  });
  const provider = createRazorpayProvider({
    key_id: "rzp_test_embedded",
    key_secret: "embedded",
    base_url: `${embedded_base_url}/simulator`,
    webhook_secret,
    fetch,
  });
  app = await buildServer({
    logger: false,
    plugins: [
      async (root) => void (await root.register(simulator.plugin, { prefix: "/simulator" })),
      webhookRoutes({ ledger: options.ledger, provider, work: options.work }),
    ],
  });
  await app.ready();
  const ready = app;
  return {
    provider,
    simulator,
    webhook_secret,
    app: ready,
    close: async () => {
      await simulator.close();
      await ready.close();
    },
  };
}
