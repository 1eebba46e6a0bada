// The files Bursar keeps in its data directory besides the database: the signing key, the
// master key, the simulator's webhook secret and the operator token's hash, whose modes the
// start checks, and the newest checkpoint kept of each database's log. Commands that write where
// the user says refuse to overwrite any of them.

import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { isPostgresUrl, maskedDb } from "./config.js";
import { operator_token_hash_file, webhook_secret_file_name } from "./datadir.js";
import { signing_key_file_name } from "./evidence/keys.js";
import { last_checkpoint_file_name } from "./evidence/witness.js";
import { master_key_file_name } from "./sources/sealed.js";

export const data_dir_secret_files: readonly string[] = [operator_token_hash_file, master_key_file_name, webhook_secret_file_name, signing_key_file_name];

/**
 * The data directory's file keeping the newest checkpoint of `db`'s log (src/evidence/witness.ts):
 * last-checkpoint for the default database, last-checkpoint-<12 hex> named after any other (its
 * absolute path, or its URL without the password), so that a data directory serving two databases
 * (a move to PostgreSQL, a staging schema, two serve processes on two files) keeps one for each,
 * and neither is refused for the other's checkpoint.
 */
export function lastCheckpointPath(data_dir: string, db: string): string {
  const name = isPostgresUrl(db) ? maskedDb(db) : resolve(db);
  if (name === resolve(data_dir, "bursar.db")) return join(data_dir, last_checkpoint_file_name);
  return join(data_dir, `${last_checkpoint_file_name}-${createHash("sha256").update(name).digest("hex").slice(0, 12)}`);
}
