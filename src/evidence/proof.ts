// The JSON documents the proof routes return and `bursar verify --inclusion/--consistency`
// accepts, and their offline checks against a trusted verifier key.

import { z } from "zod";
import { verifyConsistency, verifyInclusion, type ProofCheck } from "./merkle.js";
import { NoteError, openCheckpoint, originProblem, type NoteVerifier, type SignedCheckpoint } from "./note.js";

/** Proofs are O(log n) hashes; a tree of 2^53 leaves needs at most 2 * 53. */
export const proof_hashes_max = 128;

const hex_hash = z.string().regex(/^[0-9a-f]{64}$/, "expected 64 lower-case hex digits");
const tree_index = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

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

/** Opens a checkpoint and checks it is of the expected origin and commits to (size, root); a reason when not. */
function anchor(note: string, size: number, rootHex: string, verifier: NoteVerifier, label: string, origin: string | undefined): ProofCheck {
  let checkpoint: SignedCheckpoint;
  try {
    checkpoint = openCheckpoint(note, verifier);
  } catch (error) {
    return { ok: false, reason: `${label} checkpoint: ${(error as NoteError).message}` };
  }
  const foreign = originProblem(checkpoint.origin, origin, verifier);
  if (foreign) return { ok: false, reason: `${label} checkpoint is ${foreign}` };
  if (checkpoint.size !== size) return { ok: false, reason: `${label} checkpoint is for size ${checkpoint.size}, not ${size}` };
  if (checkpoint.rootHash.toString("hex") !== rootHex) return { ok: false, reason: `${label} checkpoint root differs from the proof's root` };
  return { ok: true };
}

/**
 * Checks an inclusion proof and that its root is signed: by `checkpoint` (a trusted note
 * the caller supplies) or else by the note embedded in the document. The checkpoint must be of
 * `origin`, by default the verifier key's name.
 */
export function checkInclusionDocument(doc: InclusionProofDocument, verifier: NoteVerifier, checkpoint?: string, origin?: string): ProofCheck {
  const proof = verifyInclusion(doc.index, doc.size, Buffer.from(doc.leaf_hash, "hex"), hashes(doc.proof), Buffer.from(doc.root_hash, "hex"));
  if (!proof.ok) return proof;
  const note = checkpoint ?? doc.checkpoint;
  if (note === null) return { ok: false, reason: `no signed checkpoint for size ${doc.size}: pass --checkpoint` };
  return anchor(note, doc.size, doc.root_hash, verifier, "the", origin);
}

/** Checks a consistency proof and that both roots are signed checkpoints of the key and of `origin` (default: the key's name). */
export function checkConsistencyDocument(doc: ConsistencyProofDocument, verifier: NoteVerifier, checkpoint?: string, origin?: string): ProofCheck {
  const proof = verifyConsistency(doc.from, doc.to, hashes(doc.proof), Buffer.from(doc.from_root, "hex"), Buffer.from(doc.to_root, "hex"));
  if (!proof.ok) return proof;
  const toNote = checkpoint ?? doc.to_checkpoint;
  if (doc.from_checkpoint === null) return { ok: false, reason: `no signed checkpoint for size ${doc.from}` };
  if (toNote === null) return { ok: false, reason: `no signed checkpoint for size ${doc.to}: pass --checkpoint` };
  const from = anchor(doc.from_checkpoint, doc.from, doc.from_root, verifier, "the older", origin);
  return from.ok ? anchor(toNote, doc.to, doc.to_root, verifier, "the newer", origin) : from;
}
