// The JSON documents the proof routes return and `bursar verify --inclusion/--consistency`
// accepts, and their offline checks against a trusted verifier key.

import { z } from "zod";
import { tree_size_max, verifyConsistency, verifyInclusion, type ProofCheck } from "./merkle.js";
import { NoteError, openCheckpoint, originProblem, type NoteVerifier, type SignedCheckpoint } from "./note.js";

/** Proofs are O(log n) hashes; a tree of 2^53 leaves needs at most 2 * 53. */
export const proof_hashes_max = 128;

const hex_hash = z.string().regex(/^[0-9a-f]{64}$/, "expected 64 lower-case hex digits");
const tree_index = z.number().int().min(0).max(tree_size_max);

export const inclusionProofSchema = z.strictObject({
  index: tree_index,
  size: tree_index,
  leaf_hash: hex_hash,
  root_hash: hex_hash,
  proof: z.array(hex_hash).max(proof_hashes_max),
  /** The signed checkpoint for `size` when the log has one, else null. */
  checkpoint: z.string().nullable(),
});

export const consistencyProofSchema = z.strictObject({
  from: tree_index,
  to: tree_index,
  from_root: hex_hash,
  to_root: hex_hash,
  proof: z.array(hex_hash).max(proof_hashes_max),
  from_checkpoint: z.string().nullable(),
  to_checkpoint: z.string().nullable(),
});

export type InclusionProofDocument = z.infer<typeof inclusionProofSchema>;
export type ConsistencyProofDocument = z.infer<typeof consistencyProofSchema>;

const hashes = (list: readonly string[]) => list.map((hex) => Buffer.from(hex, "hex"));
const base64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");
type Refusal = { ok: false; reason: string };
const fail = (reason: string): Refusal => ({ ok: false, reason });

type Opened = { ok: true; checkpoint: SignedCheckpoint } | Refusal;

/** Opens a checkpoint under the key and checks it names `origin` (default: the key's name). */
function openOfOrigin(note: string, verifier: NoteVerifier, label: string, origin: string | undefined): Opened {
  let checkpoint: SignedCheckpoint;
  try {
    checkpoint = openCheckpoint(note, verifier);
  } catch (error) {
    return fail(`${label}: ${(error as NoteError).message}`);
  }
  const foreign = originProblem(checkpoint.origin, origin, verifier);
  if (foreign) return fail(`${label} is ${foreign}`);
  return { ok: true, checkpoint };
}

/** Opens a checkpoint and checks it is of the expected origin and commits to (size, root); a reason when not. */
function anchor(note: string, size: number, rootHex: string, verifier: NoteVerifier, label: string, origin: string | undefined): ProofCheck {
  const opened = openOfOrigin(note, verifier, `${label} checkpoint`, origin);
  if (!opened.ok) return opened;
  const { checkpoint } = opened;
  if (checkpoint.size !== size) return fail(`${label} checkpoint is for size ${checkpoint.size}, not ${size}`);
  if (checkpoint.rootHash.toString("hex") !== rootHex) return fail(`${label} checkpoint root differs from the proof's root`);
  return { ok: true };
}

/** What an inclusion proof must cover when the caller names it: the entry's index, its leaf hash (hex), or both. */
export interface InclusionExpectation {
  index?: number | undefined;
  leaf_hash?: string | undefined;
}

/** Why the document is not a proof of the entry the caller named, or undefined when it is. */
function otherEntry(doc: InclusionProofDocument, expected: InclusionExpectation): string | undefined {
  if (expected.index !== undefined && doc.index !== expected.index) {
    return `the proof is for entry ${doc.index}, not entry ${expected.index} (--index)`;
  }
  if (expected.leaf_hash !== undefined && doc.leaf_hash !== expected.leaf_hash.toLowerCase()) {
    return `the proof is for leaf hash ${doc.leaf_hash}, not ${expected.leaf_hash.toLowerCase()} (--leaf-hash)`;
  }
  return undefined;
}

/**
 * Checks an inclusion proof and that its root is signed: by `checkpoint` (a trusted note
 * the caller supplies) or else by the note embedded in the document. The checkpoint must be of
 * `origin`, by default the verifier key's name. With `expected`, the proof must be of that
 * entry: a valid proof of another entry proves nothing about the one the caller asked for.
 */
export function checkInclusionDocument(
  doc: InclusionProofDocument,
  verifier: NoteVerifier,
  checkpoint?: string,
  origin?: string,
  expected: InclusionExpectation = {},
): ProofCheck {
  const other = otherEntry(doc, expected);
  if (other) return fail(other);
  const proof = verifyInclusion(doc.index, doc.size, Buffer.from(doc.leaf_hash, "hex"), hashes(doc.proof), Buffer.from(doc.root_hash, "hex"));
  if (!proof.ok) return proof;
  const note = checkpoint ?? doc.checkpoint;
  if (note === null) return fail(`no signed checkpoint for size ${doc.size}: pass --checkpoint`);
  return anchor(note, doc.size, doc.root_hash, verifier, "the", origin);
}

/** A checkpoint the auditor kept from earlier, and the option it came in by. */
interface Kept {
  checkpoint: SignedCheckpoint;
  option: string;
}

/**
 * The proof's older side against a checkpoint the auditor kept (RFC 9162 8.1.2: a client checks
 * a consistency proof from the tree head it stored, not from one the server hands it). A root
 * that differs at the same size is another history of the log: a fork, or a rewrite.
 */
function keptOlder(kept: Kept, doc: ConsistencyProofDocument): ProofCheck {
  const { checkpoint, option } = kept;
  if (checkpoint.size !== doc.from) {
    return fail(`the checkpoint you kept (${option}) is for size ${checkpoint.size}, but the proof is from size ${doc.from}: fetch a proof with from=${checkpoint.size}`);
  }
  const root = checkpoint.rootHash.toString("hex");
  if (root === doc.from_root) return { ok: true };
  return fail(
    `the log's history differs from the checkpoint you kept (${option}): at size ${doc.from} your checkpoint has root ${base64(root)}, the proof ${base64(doc.from_root)}`,
  );
}

/** The trusted checkpoints the caller passed, sorted by side: `checkpoint` is the newer side when its size is `to`, else the older when it is `from`. */
function trustedSides(
  doc: ConsistencyProofDocument,
  verifier: NoteVerifier,
  origin: string | undefined,
  checkpoint: string | undefined,
  fromCheckpoint: string | undefined,
): { ok: true; newer: string | undefined; kept: Kept[] } | Refusal {
  const kept: Kept[] = [];
  if (fromCheckpoint !== undefined) {
    const opened = openOfOrigin(fromCheckpoint, verifier, "the older checkpoint (--from-checkpoint)", origin);
    if (!opened.ok) return opened;
    kept.push({ checkpoint: opened.checkpoint, option: "--from-checkpoint" });
  }
  if (checkpoint === undefined) return { ok: true, newer: undefined, kept };
  const opened = openOfOrigin(checkpoint, verifier, "the checkpoint", origin);
  if (!opened.ok) return opened;
  const { size } = opened.checkpoint;
  if (size === doc.to) return { ok: true, newer: checkpoint, kept };
  if (size !== doc.from) return fail(`the checkpoint (--checkpoint) is for size ${size}, but the proof runs from size ${doc.from} to ${doc.to}`);
  return { ok: true, newer: undefined, kept: [...kept, { checkpoint: opened.checkpoint, option: "--checkpoint" }] };
}

/** Which checkpoint vouched for each root of a verified consistency proof: the option the caller passed it by, or null for the proof's own. */
export interface ConsistencySides {
  older: string | null;
  newer: string | null;
}

/**
 * Checks a consistency proof and that both roots are signed checkpoints of the key and of
 * `origin` (default: the key's name). The older root is checked against the checkpoint the
 * caller kept when it passes one (`fromCheckpoint`, or `checkpoint` when its size is the
 * proof's `from`), else against the document's own `from_checkpoint`; the newer against
 * `checkpoint` when its size is the proof's `to`, else the document's `to_checkpoint`.
 */
export function checkConsistencyDocument(
  doc: ConsistencyProofDocument,
  verifier: NoteVerifier,
  checkpoint?: string,
  origin?: string,
  fromCheckpoint?: string,
): ({ ok: true } & ConsistencySides) | Refusal {
  const trusted = trustedSides(doc, verifier, origin, checkpoint, fromCheckpoint);
  if (!trusted.ok) return trusted;
  for (const kept of trusted.kept) {
    const older = keptOlder(kept, doc);
    if (!older.ok) return older;
  }
  const proof = verifyConsistency(doc.from, doc.to, hashes(doc.proof), Buffer.from(doc.from_root, "hex"), Buffer.from(doc.to_root, "hex"));
  if (!proof.ok) return proof;
  if (trusted.kept.length === 0) {
    if (doc.from_checkpoint === null) return fail(`no signed checkpoint for size ${doc.from}: pass the one you kept as --from-checkpoint`);
    const from = anchor(doc.from_checkpoint, doc.from, doc.from_root, verifier, "the older", origin);
    if (!from.ok) return from;
  }
  const newer = trusted.newer ?? doc.to_checkpoint;
  if (newer === null) return fail(`no signed checkpoint for size ${doc.to}: pass --checkpoint`);
  const to = anchor(newer, doc.to, doc.to_root, verifier, "the newer", origin);
  if (!to.ok) return to;
  return { ok: true, older: trusted.kept[0]?.option ?? null, newer: trusted.newer === undefined ? null : "--checkpoint" };
}
