// `bursar key`: prints the evidence log's public verifier key (generating the signing key
// into the data directory if this is the first use, as `serve` does on first start).

import { loadConfig } from "../../config.js";
import { createLogSigner, resolveSigningKey } from "../../evidence/keys.js";
import { parsing, println, usingPath, type CliIo } from "../command.js";
import { parseArgs } from "node:util";

export const help = `
usage: bursar key

Prints the evidence log's public verifier key, <name>+<hex key id>+<base64 key>, the value
'bursar verify --key' takes and GET /.well-known/bursar/log-key serves. The name is the log
origin. It is public: publish it where auditors can find it.

If no signing key exists yet in the data directory, one is generated there (mode 0600),
exactly as the first 'bursar serve' would; a note saying so goes to stderr.

environment:
  BURSAR_SIGNING_KEY   Ed25519 private key PEM file to use (never generated; must exist)
  BURSAR_DATA_DIR      data directory holding signing-key.pem (default ./.bursar)
  BURSAR_LOG_ORIGIN    log origin and key name (default bursar.local/log)
`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  parsing(() => parseArgs({ args: argv, options: {}, strict: true }));
  const env = loadConfig(io.env);
  const source = env.signing_key_path ? `BURSAR_SIGNING_KEY=${env.signing_key_path}` : `BURSAR_DATA_DIR=${env.data_dir}`;
  const loaded = usingPath(source, () => resolveSigningKey({ explicitPath: env.signing_key_path, dataDir: env.data_dir, create: true }));
  if (loaded.created) println(io.stderr, `bursar key: generated a new signing key at ${loaded.path}`);
  println(io.stdout, createLogSigner(loaded.privateKey, env.log_origin).verifierKey);
  return 0;
}
