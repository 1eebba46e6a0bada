// `bursar admin rotate`: issues a new operator token into the data directory (only its hash is
// stored) and prints it once. A running server keeps the token it loaded until it restarts.

import { join } from "node:path";
import { loadConfig } from "../../config.js";
import { operator_token_hash_file, OperatorTokens } from "../../datadir.js";
import { parseOptions, println, usingPath, UsageError, type CliIo } from "../command.js";

export const help = `usage: bursar admin rotate

Issues a new operator token: writes its SHA-256 to $BURSAR_DATA_DIR/${operator_token_hash_file}
(mode 0600, replacing the old hash) and prints the token once on stdout. The old token stops
working when the server restarts; a running \`bursar serve\` keeps the token it loaded at start,
so restart it to pick up the new one.

Refused (exit 2) while BURSAR_ADMIN_TOKEN is set: a configured token wins over the stored
hash, so rotating the file would change nothing the server checks. Unset it (for the server
too) to manage the token with rotate, or change BURSAR_ADMIN_TOKEN itself.

Options: none.

Environment:
  BURSAR_DATA_DIR      data directory (default ./.bursar); created if missing
  BURSAR_ADMIN_TOKEN   must be unset (see above)
The other BURSAR_* variables are validated as for \`bursar serve\`.`;

export async function run(argv: string[], io: CliIo): Promise<number> {
  const { positionals } = parseOptions(argv, {});
  const [action, ...extra] = positionals;
  if (action !== "rotate") throw new UsageError(action === undefined ? "expected: admin rotate" : `unknown action ${JSON.stringify(action)} (expected rotate)`);
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  if (io.env.BURSAR_ADMIN_TOKEN) {
    throw new UsageError(
      "BURSAR_ADMIN_TOKEN is set, and a configured token wins over the stored hash, so rotating would change nothing the server checks. Unset BURSAR_ADMIN_TOKEN (for the server too), or change its value instead.",
    );
  }
  const config = loadConfig(io.env);
  const { generated } = usingPath(`BURSAR_DATA_DIR=${config.data_dir}`, () => OperatorTokens.rotate(config.data_dir));
  println(io.stdout, `New operator token (shown once; only its hash is stored in ${join(config.data_dir, operator_token_hash_file)}):`);
  println(io.stdout, `  ${generated}`);
  println(io.stdout, "");
  println(io.stdout, "A running `bursar serve` still accepts the old token: restart it to pick up this one.");
  println(io.stdout, "For `bursar agent` and `bursar block` (not for the server's environment):");
  println(io.stdout, `  export BURSAR_ADMIN_TOKEN=${generated}`);
  return 0;
}
