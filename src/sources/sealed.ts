// Secrets at rest: a source's HMAC signing key is needed in clear to check signatures, so it
// is stored sealed with AES-256-GCM under the master key (BURSAR_MASTER_KEY or the data
// directory's generated `master-key` file). Bearer secrets are stored as SHA-256 only, but for
// the answer of a rotation sent with an Idempotency-Key, sealed for its replay window (store.ts).

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { ConfigError, master_key_chars_min, type Config } from "../config.js";
import { randomSecret, secretFile } from "../datadir.js";

export const master_key_file_name = "master-key";
// One limit for the sealer and for loadConfig, which refuses a short BURSAR_MASTER_KEY at start.
export { master_key_chars_min };
const sealed_version = "v1";
const iv_bytes = 12;
const tag_bytes = 16;
const hkdf_info = "bursar/source-secrets/v1";

/** The sealed text is malformed, or was sealed under another master key or for another secret. */
export class SealError extends Error {
  override name = "SealError";
}

/** The master key does not open the sealed secrets already stored: the start stops (a
 *  ConfigError by name: the CLI's one line and exit code 2). */
export class MasterKeyError extends ConfigError {}

/** AES-256-GCM with a key derived (HKDF-SHA256) from the master key string. */
export class SecretSealer {
  private readonly key: Buffer;

  constructor(master_key: string) {
    if (typeof master_key !== "string" || master_key.length < master_key_chars_min) {
      throw new SealError(`the master key must be at least ${master_key_chars_min} characters`);
    }
    this.key = Buffer.from(hkdfSync("sha256", Buffer.from(master_key, "utf8"), Buffer.alloc(0), hkdf_info, 32));
  }

  /** `context` (e.g. the secret's id) is bound as associated data: a ciphertext moved to another row fails to open. */
  seal(plaintext: string, context: string): string {
    const iv = randomBytes(iv_bytes);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv, { authTagLength: tag_bytes });
    cipher.setAAD(Buffer.from(context, "utf8"));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return [sealed_version, iv.toString("base64url"), body.toString("base64url"), cipher.getAuthTag().toString("base64url")].join(".");
  }

  open(sealed: string, context: string): string {
    const [version, iv, body, tag, extra] = sealed.split(".");
    if (version !== sealed_version || iv === undefined || body === undefined || tag === undefined || extra !== undefined) {
      throw new SealError("sealed secret is malformed");
    }
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv, "base64url"), { authTagLength: tag_bytes });
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(Buffer.from(tag, "base64url"));
      return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
    } catch {
      throw new SealError("sealed secret does not open under this master key");
    }
  }
}

/** BURSAR_MASTER_KEY, else the data directory's `master-key` file (generated, mode 0600, on
 *  first use): `file` says which file, and whether this call generated it. */
export function resolveMasterKey(config: Pick<Config, "master_key" | "data_dir">): { key: string; file?: { path: string; created: boolean } } {
  if (config.master_key !== undefined) return { key: config.master_key };
  const { value, path, created } = secretFile(config.data_dir, master_key_file_name, randomSecret);
  return { key: value, file: { path, created } };
}
