// C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 keys from node:crypto,
// and C2SP tlog-checkpoint bodies (https://c2sp.org/tlog-checkpoint) carried inside them.

import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import { jsonPreview } from "../json-text.js";
import { sha256 } from "./canonical.js";

export const ed25519_algorithm = 0x01;
export const ed25519_public_key_bytes = 32;
export const ed25519_signature_bytes = 64;
/** signed-note: a verifier stops reading after this many signature lines. */
export const note_signatures_max = 100;
/** A checkpoint note is a few hundred bytes; refuse to parse anything absurd. */
export const note_bytes_max = 1_000_000;

/** The em dash that starts each signature line. */
const signature_line_prefix = "\u2014 ";
const hex_key_id_pattern = /^[0-9a-f]{8}$/;
const base64_pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// PKCS#8 DER prefix for a raw 32-byte Ed25519 seed (RFC 8410).
const pkcs8_ed25519_prefix = Buffer.from("302e020100300506032b657004220420", "hex");
// SubjectPublicKeyInfo DER prefix for a raw 32-byte Ed25519 public key (RFC 8410).
const spki_ed25519_prefix = Buffer.from("302a300506032b6570032100", "hex");

export class NoteError extends Error {
  override name = "NoteError";
}

/** "+" and what Go's unicode.IsSpace counts as space (JavaScript's \s also has U+FEFF, and lacks U+0085). */
const key_name_refused = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000+]/u;

/** A key name is non-empty, has no white space and no '+' (signed-note "Key names"), white space as golang.org/x/mod/sumdb/note counts it. */
export function isValidKeyName(name: string): boolean {
  return name.length > 0 && !key_name_refused.test(name);
}

/** Strict standard base64: canonical padding, no stray characters (Buffer.from is lenient). */
export function decodeBase64Strict(text: string): Buffer | undefined {
  if (!base64_pattern.test(text)) return undefined;
  const bytes = Buffer.from(text, "base64");
  return bytes.toString("base64") === text ? bytes : undefined;
}

/** Key ID: the first 4 bytes (big-endian) of SHA-256(name || 0x0A || algorithm || public key). */
export function keyId(name: string, publicKey: Uint8Array): number {
  const digest = sha256(Buffer.concat([Buffer.from(`${name}\n`, "utf8"), Buffer.from([ed25519_algorithm]), publicKey]));
  return digest.readUInt32BE(0);
}

export function keyIdHex(id: number): string {
  return id.toString(16).padStart(8, "0");
}

/** The DER SubjectPublicKeyInfo of every Ed25519 public key, before its 32 bytes (RFC 8410). */
const ed25519_spki_prefix = Buffer.from("302a300506032b6570032100", "hex");

/**
 * The 32 bytes of an Ed25519 key's public half, read from its DER SubjectPublicKeyInfo. Not
 * through a JWK export: Node 20's holds the key's lock while it builds the JS object, and a
 * garbage collection then finalising the job that generated the key takes the same lock, so the
 * process hung for good (seen once under `bursar eval`, whose gates generate their keys).
 */
export function rawPublicKey(key: KeyObject): Buffer {
  if (key.asymmetricKeyType !== "ed25519") throw new NoteError("key is not an Ed25519 key");
  const der = (key.type === "private" ? createPublicKey(key) : key).export({ format: "der", type: "spki" });
  if (der.length !== ed25519_spki_prefix.length + ed25519_public_key_bytes || !der.subarray(0, ed25519_spki_prefix.length).equals(ed25519_spki_prefix)) {
    throw new NoteError("key is not an Ed25519 key");
  }
  return der.subarray(ed25519_spki_prefix.length);
}

/** `<name>+<hex key id>+<base64(0x01 || public key)>`: the public half, safe to publish. */
export function formatVerifierKey(name: string, publicKey: Uint8Array): string {
  if (!isValidKeyName(name)) throw new NoteError(`invalid key name ${JSON.stringify(name)}`);
  if (publicKey.length !== ed25519_public_key_bytes) throw new NoteError("Ed25519 public key must be 32 bytes");
  const encoded = Buffer.concat([Buffer.from([ed25519_algorithm]), publicKey]).toString("base64");
  return `${name}+${keyIdHex(keyId(name, publicKey))}+${encoded}`;
}

export interface NoteVerifier {
  name: string;
  keyId: number;
  publicKey: KeyObject;
  /** The verifier key string it was parsed from. */
  text: string;
}

export interface NoteSigner {
  name: string;
  keyId: number;
  privateKey: KeyObject;
}

export function ed25519PublicKeyFromRaw(publicKey: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.concat([spki_ed25519_prefix, publicKey]), format: "der", type: "spki" });
}

export function ed25519PrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  if (seed.length !== 32) throw new NoteError("Ed25519 seed must be 32 bytes");
  return createPrivateKey({ key: Buffer.concat([pkcs8_ed25519_prefix, seed]), format: "der", type: "pkcs8" });
}

/** Splits off `count` '+'-separated fields; the rest (base64, which may hold '+') is the last part. */
function splitFields(text: string, count: number): string[] | undefined {
  const parts: string[] = [];
  let rest = text;
  for (let i = 0; i < count; i++) {
    const plus = rest.indexOf("+");
    if (plus < 0) return undefined;
    parts.push(rest.slice(0, plus));
    rest = rest.slice(plus + 1);
  }
  return [...parts, rest];
}

/** Parses and checks a verifier key: name, 8 hex digits matching the key, algorithm 0x01, 32 bytes. */
export function parseVerifierKey(text: string): NoteVerifier {
  const parts = splitFields(text, 2);
  const malformed = () => new NoteError(`malformed verifier key ${JSON.stringify(text.slice(0, 200))}`);
  if (!parts) throw malformed();
  const [name, idHex, encoded] = parts as [string, string, string];
  if (!isValidKeyName(name) || !hex_key_id_pattern.test(idHex)) throw malformed();
  const bytes = decodeBase64Strict(encoded);
  if (!bytes || bytes.length !== 1 + ed25519_public_key_bytes || bytes[0] !== ed25519_algorithm) throw malformed();
  const publicKey = bytes.subarray(1);
  const id = keyId(name, publicKey);
  if (keyIdHex(id) !== idHex) throw malformed();
  return { name, keyId: id, publicKey: ed25519PublicKeyFromRaw(publicKey), text };
}

/** Parses a Go-style signer key `PRIVATE+KEY+<name>+<hex id>+<base64(0x01 || seed)>`. */
export function parseSignerKey(text: string): NoteSigner {
  const parts = splitFields(text, 4);
  const malformed = () => new NoteError("malformed signer key");
  if (!parts || parts[0] !== "PRIVATE" || parts[1] !== "KEY") throw malformed();
  const [, , name, idHex, encoded] = parts as [string, string, string, string, string];
  if (!isValidKeyName(name) || !hex_key_id_pattern.test(idHex)) throw malformed();
  const bytes = decodeBase64Strict(encoded);
  if (!bytes || bytes.length !== 33 || bytes[0] !== ed25519_algorithm) throw malformed();
  const privateKey = ed25519PrivateKeyFromSeed(bytes.subarray(1));
  const id = keyId(name, rawPublicKey(createPublicKey(privateKey)));
  if (keyIdHex(id) !== idHex) throw malformed();
  return { name, keyId: id, privateKey };
}

/** Note text: UTF-8, ends in a newline, no blank line, no control characters but newline. */
function isValidNoteText(text: string): boolean {
  return text.length > 0 && text.endsWith("\n") && !text.includes("\n\n") && !/[\u0000-\u0009\u000b-\u001f\ufffd]/.test(text);
}

/** Signs `text` as a signed note with one signature line. */
export function signNote(text: string, signer: NoteSigner): string {
  if (!isValidNoteText(text)) throw new NoteError("malformed note");
  const signature = sign(null, Buffer.from(text, "utf8"), signer.privateKey);
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(signer.keyId);
  return `${text}\n${signature_line_prefix}${signer.name} ${Buffer.concat([prefix, signature]).toString("base64")}\n`;
}

export interface NoteSignature {
  name: string;
  keyId: number;
  /** The base64 of key id || signature, as on the line. */
  base64: string;
}

export interface ParsedNote {
  text: string;
  signatures: NoteSignature[];
}

function decodeUtf8(message: string | Uint8Array): string {
  if (typeof message === "string") return message;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(message);
  } catch {
    throw new NoteError("malformed note");
  }
}

/** Splits a signed note into text and signature lines; checks syntax only, not signatures. */
export function parseNote(message: string | Uint8Array): ParsedNote {
  const decoded = decodeUtf8(message);
  if (decoded.length > note_bytes_max) throw new NoteError("malformed note");
  const split = decoded.lastIndexOf("\n\n");
  if (split < 0) throw new NoteError("malformed note");
  const text = decoded.slice(0, split + 1);
  const block = decoded.slice(split + 2);
  if (!isValidNoteText(text) || !block.endsWith("\n")) throw new NoteError("malformed note");
  const lines = block.slice(0, -1).split("\n");
  if (lines.length > note_signatures_max) throw new NoteError("malformed note");
  return { text, signatures: lines.map(parseSignatureLine) };
}

function parseSignatureLine(line: string): NoteSignature {
  if (!line.startsWith(signature_line_prefix)) throw new NoteError("malformed note");
  const rest = line.slice(signature_line_prefix.length);
  const space = rest.indexOf(" ");
  const name = rest.slice(0, space);
  const base64 = rest.slice(space + 1);
  const bytes = decodeBase64Strict(base64);
  if (space < 0 || !isValidKeyName(name) || !bytes || bytes.length < 5) throw new NoteError("malformed note");
  return { name, keyId: bytes.readUInt32BE(0), base64 };
}

const no_verifiable_signatures = "note has no verifiable signatures";
/** How many of a refused checkpoint's signers its refusal names. */
const signers_named_max = 3;

/**
 * The keys a well-formed note is signed by, when none is the verifier's: usually another log's
 * checkpoint, or the right log under another key. Names come from the file: quoted, cut short.
 */
function signedOnlyBy(note: string): string {
  const keys = [...new Set(parseNote(note).signatures.map((signature) => `${signature.name}+${keyIdHex(signature.keyId)}`))];
  const more = keys.length > signers_named_max ? ` and ${keys.length - signers_named_max} more` : "";
  return `it is signed only by ${keys.slice(0, signers_named_max).map(jsonPreview).join(", ")}${more} (another log's checkpoint, or another key)`;
}

export interface OpenedNote {
  text: string;
  /** Signatures by a known key that verified. */
  verified: NoteSignature[];
  /** Signatures by keys not in the list. */
  unverified: NoteSignature[];
}

/**
 * Parses `message` and checks each signature whose (name, key id) matches a verifier.
 * A matching signature that does not verify is an error, as is a note with none verified.
 */
export function openNote(message: string | Uint8Array, verifiers: readonly NoteVerifier[]): OpenedNote {
  const note = parseNote(message);
  const verified: NoteSignature[] = [];
  const unverified: NoteSignature[] = [];
  const data = Buffer.from(note.text, "utf8");
  // A signature line repeated is checked once: a note holding one valid signature 100 times
  // cost 100 Ed25519 verifications.
  const seen = new Set<string>();
  for (const signature of note.signatures) {
    if (seen.has(signature.base64)) continue;
    seen.add(signature.base64);
    const candidates = verifiers.filter((v) => v.name === signature.name && v.keyId === signature.keyId);
    const unique = new Set(candidates.map((v) => v.text));
    if (unique.size > 1) throw new NoteError(`ambiguous key ${signature.name}+${keyIdHex(signature.keyId)}`);
    const verifier = candidates[0];
    if (!verifier) {
      unverified.push(signature);
      continue;
    }
    const bytes = Buffer.from(signature.base64, "base64");
    if (bytes.length !== 4 + ed25519_signature_bytes || !verify(null, data, verifier.publicKey, bytes.subarray(4))) {
      throw new NoteError(`invalid signature for key ${signature.name}+${keyIdHex(signature.keyId)}`);
    }
    verified.push(signature);
  }
  if (verified.length === 0) throw new NoteError(no_verifiable_signatures);
  return { text: note.text, verified, unverified };
}

export interface CheckpointBody {
  origin: string;
  size: number;
  /** 32 bytes. */
  rootHash: Buffer;
}

/** tlog-checkpoint body: origin line, decimal tree size, base64 root hash, each ending in a newline. */
export function formatCheckpoint(body: CheckpointBody): string {
  if (!body.origin || /[\n\u0000-\u001f]/.test(body.origin)) throw new NoteError("invalid checkpoint origin");
  if (!Number.isSafeInteger(body.size) || body.size < 0) throw new NoteError("invalid checkpoint size");
  if (body.rootHash.length !== 32) throw new NoteError("checkpoint root hash must be 32 bytes");
  return `${body.origin}\n${body.size}\n${body.rootHash.toString("base64")}\n`;
}

/** Parses a checkpoint body; extension lines after the root hash are allowed and ignored. */
export function parseCheckpoint(text: string): CheckpointBody {
  const lines = text.split("\n");
  const [origin, sizeText, rootText] = lines;
  if (lines.length < 4 || lines[lines.length - 1] !== "" || !origin || !sizeText || !rootText) {
    throw new NoteError("malformed checkpoint");
  }
  if (!/^(0|[1-9][0-9]{0,15})$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) {
    throw new NoteError("malformed checkpoint size");
  }
  const rootHash = decodeBase64Strict(rootText);
  if (!rootHash || rootHash.length !== 32) throw new NoteError("malformed checkpoint root hash");
  return { origin, size: Number(sizeText), rootHash };
}

export interface SignedCheckpoint extends CheckpointBody {
  /** The whole signed note text, as served and exported. */
  note: string;
}

/**
 * Why a checkpoint did not open: its text is not a signed note ("syntax", including text damaged
 * in transfer), no signature of the key verifies ("signature"), or it is signed but its body is
 * not a checkpoint ("body").
 */
export class CheckpointError extends NoteError {
  constructor(
    readonly stage: "syntax" | "signature" | "body",
    message: string,
  ) {
    super(message);
  }
}

/** What copying a note as text (a file) typically does to it, which no signed note has; undefined for none of it. */
export function transferDamage(note: string): string | undefined {
  if (note.startsWith("\ufeff")) return "it starts with a byte order mark, which is not part of the note";
  if (note.includes("\r\n")) return "it has CRLF line endings, and a signed note's lines end in LF alone (convert it back, e.g. with dos2unix)";
  if (!note.endsWith("\n")) return "it does not end with a newline, as a signed note does (lost in copying? $(cat FILE) drops it)";
  return undefined;
}

/**
 * Opens a signed checkpoint with one trusted key: signature, then body syntax; a CheckpointError
 * says which failed. Where `note` was read from a file, the error names what copying it as text
 * did to it (transferDamage); inside an export or a proof, where it is a JSON string, it does not.
 */
export function openCheckpoint(note: string, verifier: NoteVerifier, options: { from_file?: boolean } = {}): SignedCheckpoint {
  let opened: OpenedNote;
  try {
    opened = openNote(note, [verifier]);
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    const damage = options.from_file ? transferDamage(note) : undefined;
    if (damage) throw new CheckpointError("syntax", `${error.message}: ${damage}`);
    if (error.message === no_verifiable_signatures) throw new CheckpointError("signature", `${error.message}: ${signedOnlyBy(note)}`);
    throw new CheckpointError(error.message === "malformed note" ? "syntax" : "signature", error.message);
  }
  try {
    return { ...parseCheckpoint(opened.text), note };
  } catch (error) {
    if (!(error instanceof NoteError)) throw error;
    throw new CheckpointError("body", error.message);
  }
}

/**
 * Why a verified checkpoint's origin is not the log the caller means ("for origin …, not …"),
 * or undefined when it is. A signature line's key name and id are not signed, so one Ed25519
 * key shared by two logs (say staging and prod) signs checkpoints that pass for either; only
 * the signed origin line tells them apart. The expected origin is `expected` when given, else
 * the verifier key's name, which Bursar sets to its origin.
 */
export function originProblem(origin: string, expected: string | undefined, verifier: NoteVerifier): string | undefined {
  const wanted = expected ?? verifier.name;
  if (origin === wanted) return undefined;
  const source = expected === undefined ? "the key's name; pass --origin if the log's origin differs from it" : "--origin";
  // The origin is the signed note's, from a file: quoted cut short, as any value read from one.
  return `for origin ${jsonPreview(origin)}, not ${JSON.stringify(wanted)} (${source})`;
}
