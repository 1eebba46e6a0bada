// The files Bursar keeps in its data directory besides the database: the signing key, the
// master key, the simulator's webhook secret and the operator token's hash. The start checks
// their modes; commands that write where the user says refuse to overwrite them.

import { operator_token_hash_file, webhook_secret_file_name } from "./datadir.js";
import { signing_key_file_name } from "./evidence/keys.js";
import { master_key_file_name } from "./sources/sealed.js";

export const data_dir_secret_files: readonly string[] = [operator_token_hash_file, master_key_file_name, webhook_secret_file_name, signing_key_file_name];
