// The data directory: secret files with mode 0600, and the operator token stored as a hash.

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { newToken } from "./ids.js";

export const operator_token_hash_file = "operator-token.sha256";

export function ensureDataDir(data_dir: string): void {
  mkdirSync(data_dir, { recursive: true, mode: 0o700 });
}

export function writeSecretFile(path: string, contents: string): void {
  writeFileSync(path, contents, { mode: 0o600, flag: "w" });
  chmodSync(path, 0o600);
}

/** Reads a secret file from the data directory, creating it with `make()` on first use. */
export function secretFile(data_dir: string, name: string, make: () => string): { value: string; created: boolean } {
  const path = join(data_dir, name);
  if (existsSync(path)) return { value: readFileSync(path, "utf8").trim(), created: false };
  ensureDataDir(data_dir);
  const value = make();
  writeSecretFile(path, `${value}\n`);
  return { value, created: true };
}

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/** Checks operator tokens in constant time against the configured token or the stored hash. */
export class OperatorTokens {
  private constructor(private readonly hash: Buffer | null) {}

  static fromToken(token: string): OperatorTokens {
    return new OperatorTokens(sha256(token));
  }

  static none(): OperatorTokens {
    return new OperatorTokens(null);
  }

  get configured(): boolean {
    return this.hash !== null;
  }

  check(token: string | undefined): boolean {
    if (!this.hash || !token) return false;
    return timingSafeEqual(sha256(token), this.hash);
  }

  /** BURSAR_ADMIN_TOKEN wins; else the stored hash; else (first start) a new token is
   *  generated, only its hash stored, and the token returned once for printing. */
  static load(data_dir: string, admin_token: string | undefined, generate: boolean): { tokens: OperatorTokens; generated?: string } {
    if (admin_token) return { tokens: OperatorTokens.fromToken(admin_token) };
    const path = join(data_dir, operator_token_hash_file);
    if (existsSync(path)) return { tokens: new OperatorTokens(Buffer.from(readFileSync(path, "utf8").trim(), "hex")) };
    if (!generate) return { tokens: OperatorTokens.none() };
    return OperatorTokens.rotate(data_dir);
  }

  static rotate(data_dir: string): { tokens: OperatorTokens; generated: string } {
    ensureDataDir(data_dir);
    const token = newToken("bsr_op");
    writeSecretFile(join(data_dir, operator_token_hash_file), `${sha256(token).toString("hex")}\n`);
    return { tokens: OperatorTokens.fromToken(token), generated: token };
  }
}

export function randomSecret(): string {
  return randomBytes(32).toString("hex");
}
