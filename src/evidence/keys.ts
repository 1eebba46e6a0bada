// The log's Ed25519 signing key: loaded from a PEM file or generated into the data
// directory (mode 0600) on first use, and the public verifier key derived from it.

import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { secretFile } from "../datadir.js";
import { formatVerifierKey, isValidKeyName, keyId, keyIdHex, rawPublicKey, type NoteSigner } from "./note.js";

export const signing_key_file_name = "signing-key.pem";

export class SigningKeyError extends Error {
  // ConfigError is the name the CLI turns into a one-line message with exit code 2.
  override name = "ConfigError";
}

/** Everything the log needs to sign: the private key, its note name, and the public halves. */
export interface LogSigner extends NoteSigner {
  publicKey: KeyObject;
  publicKeyRaw: Buffer;
  /** `<name>+<hex key id>+<base64>`: print it, publish it, give it to verifiers. */
  verifierKey: string;
  keyIdHex: string;
}

export function createLogSigner(privateKey: KeyObject, name: string): LogSigner {
  if (privateKey.type !== "private" || privateKey.asymmetricKeyType !== "ed25519") {
    throw new SigningKeyError("the signing key must be an Ed25519 private key");
  }
  if (!isValidKeyName(name)) throw new SigningKeyError(`invalid key name ${JSON.stringify(name)} (no spaces or '+')`);
  const publicKey = createPublicKey(privateKey);
  const publicKeyRaw = rawPublicKey(publicKey);
  const id = keyId(name, publicKeyRaw);
  return {
    name,
    keyId: id,
    keyIdHex: keyIdHex(id),
    privateKey,
    publicKey,
    publicKeyRaw,
    verifierKey: formatVerifierKey(name, publicKeyRaw),
  };
}

/** Reads an Ed25519 private key in PEM (PKCS#8). */
export function loadSigningKey(path: string): KeyObject {
  let pem: string;
  try {
    pem = readFileSync(path, "utf8");
  } catch (error) {
    throw new SigningKeyError(`cannot read signing key ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  return parseSigningKey(pem, path);
}

/** An Ed25519 private key from PEM text read from `path` (named in the errors). */
function parseSigningKey(pem: string, path: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: "pem" });
  } catch {
    throw new SigningKeyError(`signing key ${path} is not a PEM private key`);
  }
  if (key.asymmetricKeyType !== "ed25519") throw new SigningKeyError(`signing key ${path} is not an Ed25519 key`);
  return key;
}

export function generateSigningKeyPem(): string {
  const { privateKey } = generateKeyPairSync("ed25519");
  return privateKey.export({ format: "pem", type: "pkcs8" }).toString();
}

export interface SigningKeyLocation {
  /** BURSAR_SIGNING_KEY: an explicit PEM path; never generated, must exist. */
  explicitPath?: string | undefined;
  /** BURSAR_DATA_DIR: where `signing-key.pem` is generated when no explicit path is given. */
  dataDir: string;
  /** Generate the data-directory key when it does not exist yet. */
  create: boolean;
}

export interface LoadedSigningKey {
  privateKey: KeyObject;
  path: string;
  created: boolean;
}

/**
 * The signing key per the configuration: BURSAR_SIGNING_KEY if set, else the data directory's
 * signing-key.pem, generated with mode 0600 when `create` is set and it is missing. Creation
 * goes through secretFile: the key is written in full to a staged file and published with a hard
 * link, so no process ever reads a half-written key, a crash leaves no empty one, and of two
 * processes starting at once the loser reads the winner's key.
 */
export function resolveSigningKey(location: SigningKeyLocation): LoadedSigningKey {
  if (location.explicitPath) return { privateKey: loadSigningKey(location.explicitPath), path: location.explicitPath, created: false };
  const path = join(location.dataDir, signing_key_file_name);
  if (!location.create) return { privateKey: loadSigningKey(path), path, created: false };
  // secretFile stores the value plus one newline; the PEM already ends with one.
  const stored = secretFile(location.dataDir, signing_key_file_name, () => generateSigningKeyPem().trimEnd());
  return { privateKey: parseSigningKey(stored.value, path), path, created: stored.created };
}
