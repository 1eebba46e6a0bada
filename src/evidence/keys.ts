// The log's Ed25519 signing key: loaded from a PEM file or generated into the data
// directory (mode 0600) on first use, and the public verifier key derived from it.

import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { join } from "node:path";
import { errorCode, existingSecretFile, readRegularFile, secretFile } from "../datadir.js";
import { formatVerifierKey, isValidKeyName, keyId, keyIdHex, rawPublicKey, type NoteSigner } from "./note.js";

export const signing_key_file_name = "signing-key.pem";

export class SigningKeyError extends Error {
  // ConfigError is the name the CLI turns into a one-line message with exit code 2.
  override name = "ConfigError";
}

/** The log was started under another key than the one given. */
export class ForeignSigningKeyError extends SigningKeyError {}

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

/** How errors name a key file found by path (the data directory's); BURSAR_SIGNING_KEY's is named by its variable. */
function keySubject(path: string): string {
  return `signing key ${path}`;
}

/** A key file's text from `read`; every failure is a SigningKeyError naming `subject`. */
function readKeyText(read: () => string | undefined, subject: string): string {
  let text: string | undefined;
  try {
    text = read();
  } catch (error) {
    // Already one line naming the file (not a regular file, a symbolic link in the data directory).
    if (error instanceof Error && error.name === "ConfigError") throw error;
    throw new SigningKeyError(`${subject}: cannot read it (${errorCode(error) ?? "error"})`);
  }
  if (text === undefined) throw new SigningKeyError(`${subject}: cannot read it (ENOENT: no such file)`);
  return text;
}

/** Reads an Ed25519 private key in PEM (PKCS#8) from a regular file; `subject` names it in errors. */
export function loadSigningKey(path: string, subject = keySubject(path)): KeyObject {
  return parseSigningKey(readKeyText(() => readRegularFile(path, subject), subject), subject);
}

/** An Ed25519 private key from PEM text read from the file `subject` names. */
function parseSigningKey(pem: string, subject: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: "pem" });
  } catch {
    throw new SigningKeyError(`${subject}: not a PEM private key`);
  }
  if (key.asymmetricKeyType !== "ed25519") throw new SigningKeyError(`${subject}: not an Ed25519 key`);
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
  const explicit = location.explicitPath;
  // The variable is named in every error about the file the user chose (a FIFO, a missing file, not a key).
  if (explicit) return { privateKey: loadSigningKey(explicit, `BURSAR_SIGNING_KEY=${explicit}`), path: explicit, created: false };
  const path = join(location.dataDir, signing_key_file_name);
  if (!location.create) {
    const pem = readKeyText(() => existingSecretFile(location.dataDir, signing_key_file_name), keySubject(path));
    return { privateKey: parseSigningKey(pem, keySubject(path)), path, created: false };
  }
  // secretFile stores the value plus one newline; the PEM already ends with one.
  const stored = secretFile(location.dataDir, signing_key_file_name, () => generateSigningKeyPem().trimEnd());
  return { privateKey: parseSigningKey(stored.value, keySubject(path)), path, created: stored.created };
}
