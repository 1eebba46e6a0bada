// `bursar simulator`: runs the Razorpay-compatible simulator standalone at `/` until SIGINT/SIGTERM.

import type { FastifyInstance } from "fastify";
import { fetchRefusedPort, logLevel, secret } from "../../config.js";
import { buildServer, listenFailure, loggerOptions } from "../../server/app.js";
import { createSimulator, test_card_declined, test_card_success, type Simulator } from "../../provider/simulator/index.js";
import { CommandError, UsageError, httpUrl, listenHost, parseStrict, println, secretOption, type CliIo } from "../command.js";

export const simulator_port_default = 8788;
export const simulator_host_default = "127.0.0.1";

export const help = `
usage: bursar simulator [--port 8788] [--host 127.0.0.1] [--webhook-url URL] --webhook-secret SECRET

Runs Bursar's Razorpay-compatible simulator standalone at / (no key, no network needed).
Point the razorpay provider at it with RAZORPAY_BASE_URL=http://127.0.0.1:8788 and any
RAZORPAY_KEY_ID starting with rzp_test_ plus a non-empty RAZORPAY_KEY_SECRET.

options:
  --port N              port to listen on (default ${simulator_port_default}; 0 picks a free one)
  --host HOST           address to bind (default ${simulator_host_default}; may not be empty: 0.0.0.0
                        or :: listens on every interface)
  --webhook-url URL     where signed webhooks are POSTed, e.g. http://127.0.0.1:8787/webhooks/razorpay
                        (without it, events wait in the outbox: GET /sim/webhooks); a URL with
                        user:password@ is refused (exit 2) without being shown
  --webhook-secret S    signs X-Razorpay-Signature (or set RAZORPAY_WEBHOOK_SECRET); one of only
                        whitespace is refused (exit 2)

routes:
  POST /v1/orders, GET /v1/orders?receipt=, GET /v1/orders/{id}, GET /v1/orders/{id}/payments,
  GET /v1/payments/{id}, POST /v1/payments/{id}/capture          Razorpay API (Basic auth)
  POST /sim/orders/{order_id}/pay {"card":"${test_card_success}"}     test checkout (authorizes)
       declining card ${test_card_declined} gives a failed payment
  POST /sim/payments/{payment_id}/expire                          refunds an authorized payment uncaptured
  POST /sim/payments/{payment_id}/refund                          refunds a captured payment in full
  GET|POST|DELETE /sim/faults                                     fault knobs (see docs/simulator.md)
  GET /sim/webhooks, POST /sim/webhooks/deliver, POST /sim/webhooks/redeliver

Environment:
  RAZORPAY_WEBHOOK_SECRET   webhook signing secret when --webhook-secret is not given (not only
                            whitespace: such a value is refused, exit 2, without being shown)
  BURSAR_LOG_LEVEL          the JSON log's level on stdout: fatal, error, warn, info (default),
                            debug, trace or silent (warn keeps the request log out); another
                            value is refused, exit 2
`;

function parsePort(text: string | undefined): number {
  if (text === undefined) return simulator_port_default;
  const port = Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(port) || port > 65_535) throw new UsageError("--port must be an integer from 0 to 65535");
  const refused = fetchRefusedPort(port, `--port ${port}`);
  if (refused !== undefined) throw new UsageError(refused);
  return port;
}

/**
 * --webhook-url: http(s), without user:password@ (httpUrl): the banner would print the password, and
 * fetch refuses such a URL with an error that repeats it, kept in the outbox (GET /sim/webhooks).
 */
function parseWebhookUrl(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const url = httpUrl(text, "--webhook-url", { example: "http://127.0.0.1:8787/webhooks/razorpay", credentials_in: "--webhook-secret (or RAZORPAY_WEBHOOK_SECRET)" });
  return url.toString();
}

/** Listen errors as one line naming --host / --port (exit 2), as `bursar serve` reports them. */
async function listen(app: FastifyInstance, simulator: Simulator, host: string, port: number): Promise<string> {
  try {
    return await app.listen({ port, host });
  } catch (error) {
    await simulator.close().then(() => app.close());
    const failure = listenFailure(error, { address: `--host ${host} --port ${port}`, host: `--host ${host}`, who: "another bursar simulator" });
    throw failure === undefined ? error : new CommandError(failure);
  }
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseStrict({
    args: argv,
    strict: true,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "webhook-url": { type: "string" },
      "webhook-secret": { type: "string" },
    },
  });
  const log_level = logLevel(io.env);
  const port = parsePort(values.port);
  const host = values.host === undefined ? simulator_host_default : listenHost(values.host);
  const webhook_url = parseWebhookUrl(values["webhook-url"]);
  const webhook_secret = secretOption(values["webhook-secret"], "--webhook-secret", "secret") ?? secret(io.env, "RAZORPAY_WEBHOOK_SECRET");
  if (!webhook_secret) throw new UsageError("--webhook-secret (or RAZORPAY_WEBHOOK_SECRET) is required to sign webhooks");

  const simulator = createSimulator({ webhook_secret, webhook_url });
  const app = await buildServer({ logger: loggerOptions(log_level), plugins: [async (server) => void (await server.register(simulator.plugin))] });
  const address = await listen(app, simulator, host, port);
  println(io.stdout, `bursar simulator listening on ${address}`);
  println(io.stdout, `  Razorpay API:  ${address}/v1/orders (Basic auth: any rzp_test_ key id, non-empty secret)`);
  println(io.stdout, `  checkout:      POST ${address}/sim/orders/{order_id}/pay {"card":"${test_card_success}"}`);
  println(io.stdout, `  webhooks:      ${webhook_url ?? "no --webhook-url: events wait in GET /sim/webhooks"}`);

  return new Promise<number>((resolve) => {
    let closing = false;
    const stop = (signal: string) => {
      if (closing) return;
      closing = true;
      println(io.stdout, `bursar simulator: ${signal}, shutting down`);
      void simulator
        .close()
        .then(() => app.close())
        .then(
          () => resolve(0),
          () => resolve(1),
        );
    };
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
  });
}
