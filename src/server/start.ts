// Starting `bursar serve`: configuration, the data directory, the library, the HTTP server.

import type { FastifyInstance } from "fastify";
import { createBursar, type Bursar } from "../index.js";
import type { Config } from "../config.js";
import { ensureDataDir, OperatorTokens } from "../datadir.js";
import { buildServer, loggerOptions } from "./app.js";

export interface Started {
  app: FastifyInstance;
  bursar: Bursar;
  url: string;
  operator: OperatorTokens;
  /** The operator token, when this start generated it (printed once, never stored). */
  generated_token?: string;
}

export async function startServer(config: Config, options: { logger?: boolean } = {}): Promise<Started> {
  ensureDataDir(config.data_dir);
  const { tokens, generated } = OperatorTokens.load(config.data_dir, config.admin_token, true);
  const bursar = await createBursar({ db: config.db });
  const app = await buildServer({
    logger: options.logger === false ? false : loggerOptions(),
    onClose: () => bursar.close(),
  });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const started: Started = { app, bursar, url: `http://${config.host}:${port}`, operator: tokens };
  if (generated) started.generated_token = generated;
  return started;
}
