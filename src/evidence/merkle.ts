// RFC 6962 / RFC 9162 Merkle tree hashing: leaf and node hashes, an incremental in-memory
// tree that answers roots and proofs in O(log n) hashes, a streaming root for verifiers,
// and the inclusion and consistency proof verifiers of RFC 9162 section 2.1.

import { createHash, hash } from "node:crypto";

export const hash_size_bytes = 32;
/** Tree sizes and indexes stay exact JavaScript integers. */
export const tree_size_max = Number.MAX_SAFE_INTEGER;

const leaf_prefix = Buffer.from([0x00]);
/** Leaves up to this size are hashed from one scratch copy with the one-shot crypto.hash. */
const scratch_bytes = 65_536;
// One scratch buffer is safe: hashing is synchronous on the single JavaScript thread.
const scratch = Buffer.alloc(scratch_bytes);
const node_scratch = Buffer.alloc(1 + 2 * hash_size_bytes);

/** SHA-256(0x00 || data): the hash of one leaf (one canonical entry). */
export function leafHash(data: Uint8Array | string): Buffer {
  // A string that surely fits (UTF-8 takes at most 3 bytes per UTF-16 unit) is encoded straight
  // into the scratch buffer, without an intermediate Buffer.
  if (typeof data === "string" && data.length * 3 < scratch_bytes) {
    scratch[0] = 0x00;
    const written = scratch.write(data, 1, "utf8");
    return hash("sha256", scratch.subarray(0, written + 1), "buffer");
  }
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  if (bytes.length >= scratch_bytes) return createHash("sha256").update(leaf_prefix).update(bytes).digest();
  scratch[0] = 0x00;
  scratch.set(bytes, 1);
  return hash("sha256", scratch.subarray(0, bytes.length + 1), "buffer");
}

/** SHA-256(0x01 || left || right): the hash of an interior node. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  if (left.length !== hash_size_bytes || right.length !== hash_size_bytes) {
    return createHash("sha256").update(Buffer.from([0x01])).update(left).update(right).digest();
  }
  node_scratch[0] = 0x01;
  node_scratch.set(left, 1);
  node_scratch.set(right, 1 + hash_size_bytes);
  return hash("sha256", node_scratch, "buffer");
}

/** The root of the empty tree: SHA-256 of the empty string. */
export function emptyRoot(): Buffer {
  return createHash("sha256").digest();
}

/** The largest power of two strictly below n (n >= 2): RFC 6962's split point k. */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function isPowerOfTwo(n: number): boolean {
  return n >= 1 && splitPoint(n * 2) === n;
}

function isIndex(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

function isHash(value: Uint8Array): boolean {
  return value instanceof Uint8Array && value.length === hash_size_bytes;
}

/** Growable array of 32-byte hashes in one buffer, so a million leaves are not a million objects. */
class HashArray {
  private bytes = new Uint8Array(hash_size_bytes * 1024);
  count = 0;

  push(hash: Uint8Array): void {
    if ((this.count + 1) * hash_size_bytes > this.bytes.length) {
      const grown = new Uint8Array(this.bytes.length * 2);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes.set(hash, this.count * hash_size_bytes);
    this.count += 1;
  }

  /** A view valid until the next push; callers hash it or copy it at once. */
  view(index: number): Uint8Array {
    return this.bytes.subarray(index * hash_size_bytes, (index + 1) * hash_size_bytes);
  }
}

/**
 * An append-only Merkle tree held in memory as every complete subtree's hash, level by
 * level (about 2n hashes). Roots and proofs for any earlier size cost O(log n) hashes.
 */
export class MerkleTree {
  /** levels[h][i] = hash of leaves [i * 2^h, (i + 1) * 2^h). */
  private readonly levels: HashArray[] = [new HashArray()];

  get size(): number {
    return this.levels[0]!.count;
  }

  append(leaf: Uint8Array): void {
    if (!isHash(leaf)) throw new RangeError("leaf hash must be 32 bytes");
    this.levels[0]!.push(leaf);
    let index = this.size - 1;
    for (let height = 0; index % 2 === 1; height++) {
      const level = this.levels[height]!;
      const parent = nodeHash(level.view(index - 1), level.view(index));
      if (this.levels.length === height + 1) this.levels.push(new HashArray());
      this.levels[height + 1]!.push(parent);
      index = (index - 1) / 2;
    }
  }

  leaf(index: number): Buffer {
    this.assertRange(index, index + 1);
    return Buffer.from(this.levels[0]!.view(index));
  }

  /** RFC 6962 MTH(D[0:size]). */
  root(size: number = this.size): Buffer {
    if (!isIndex(size) || size > this.size) throw new RangeError(`size ${size} outside 0..${this.size}`);
    return size === 0 ? emptyRoot() : this.rangeHash(0, size);
  }

  /** MTH(D[start:end]) for a range that starts on a boundary of a power of two >= its length. */
  private rangeHash(start: number, end: number): Buffer {
    const count = end - start;
    if (isPowerOfTwo(count) && start % count === 0) {
      const height = Math.log2(count);
      return Buffer.from(this.levels[height]!.view(start / count));
    }
    const k = splitPoint(count);
    return nodeHash(this.rangeHash(start, start + k), this.rangeHash(start + k, end));
  }

  /** RFC 6962 PATH(index, D[0:size]), ordered from the leaf's sibling up to the root. */
  inclusionProof(index: number, size: number): Buffer[] {
    this.assertRange(index, size);
    if (index >= size) throw new RangeError(`index ${index} must be below size ${size}`);
    const path: Buffer[] = [];
    let start = 0;
    let end = size;
    while (end - start > 1) {
      const k = splitPoint(end - start);
      if (index - start < k) {
        path.push(this.rangeHash(start + k, end));
        end = start + k;
      } else {
        path.push(this.rangeHash(start, start + k));
        start += k;
      }
    }
    return path.reverse();
  }

  /** RFC 6962 PROOF(from, D[0:to]); empty when from is 0 or equals to. */
  consistencyProof(from: number, to: number): Buffer[] {
    this.assertRange(from, to);
    if (from > to) throw new RangeError(`from ${from} must not exceed to ${to}`);
    if (from === 0 || from === to) return [];
    const proof: Buffer[] = [];
    let start = 0;
    let end = to;
    let m = from;
    let complete = true;
    while (m !== end - start) {
      const k = splitPoint(end - start);
      if (m <= k) {
        proof.push(this.rangeHash(start + k, end));
        end = start + k;
      } else {
        proof.push(this.rangeHash(start, start + k));
        start += k;
        m -= k;
        complete = false;
      }
    }
    if (!complete) proof.push(this.rangeHash(start, end));
    return proof.reverse();
  }

  private assertRange(low: number, high: number): void {
    if (!isIndex(low) || !isIndex(high) || high > this.size) {
      throw new RangeError(`range ${low}..${high} outside tree of size ${this.size}`);
    }
  }
}

/** The root of a tree fed one leaf at a time, holding only O(log n) hashes: for verifiers. */
export class CompactRange {
  private readonly hashes: Buffer[] = [];
  private readonly heights: number[] = [];
  size = 0;

  append(leaf: Buffer): void {
    let hash = leaf;
    let height = 0;
    while (this.heights.length > 0 && this.heights[this.heights.length - 1] === height) {
      this.heights.pop();
      hash = nodeHash(this.hashes.pop()!, hash);
      height += 1;
    }
    this.hashes.push(hash);
    this.heights.push(height);
    this.size += 1;
  }

  root(): Buffer {
    if (this.hashes.length === 0) return emptyRoot();
    let root = this.hashes[this.hashes.length - 1]!;
    for (let i = this.hashes.length - 2; i >= 0; i--) root = nodeHash(this.hashes[i]!, root);
    return root;
  }
}

export type ProofCheck = { ok: true } | { ok: false; reason: string };

const proof_ok: ProofCheck = { ok: true };
function fail(reason: string): ProofCheck {
  return { ok: false, reason };
}

/** Shifts fn and sn right together until fn is odd or zero (RFC 9162 2.1.3.2 step 4.b.ii). */
function shiftUntilOdd(state: { fn: number; sn: number }): void {
  while (state.fn % 2 === 0 && state.fn !== 0) {
    state.fn /= 2;
    state.sn = Math.floor(state.sn / 2);
  }
}

function shiftOnce(state: { fn: number; sn: number }): void {
  state.fn = Math.floor(state.fn / 2);
  state.sn = Math.floor(state.sn / 2);
}

/** The root an inclusion proof implies, or a reason it cannot be one (RFC 9162 2.1.3.2). */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
): { root: Buffer } | { reason: string } {
  if (!isIndex(index) || !isIndex(size) || index >= size) return { reason: `index ${index} not below size ${size}` };
  if (!isHash(leaf)) return { reason: "leaf hash is not 32 bytes" };
  const state = { fn: index, sn: size - 1 };
  let root: Buffer = Buffer.from(leaf);
  for (const sibling of proof) {
    if (!isHash(sibling)) return { reason: "proof element is not 32 bytes" };
    if (state.sn === 0) return { reason: "proof is longer than the path" };
    if (state.fn % 2 === 1 || state.fn === state.sn) {
      root = nodeHash(sibling, root);
      shiftUntilOdd(state);
    } else {
      root = nodeHash(root, sibling);
    }
    shiftOnce(state);
  }
  if (state.sn !== 0) return { reason: "proof is shorter than the path" };
  return { root };
}

export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): ProofCheck {
  if (!isHash(root)) return fail("root hash is not 32 bytes");
  const computed = rootFromInclusionProof(index, size, leaf, proof);
  if ("reason" in computed) return fail(computed.reason);
  return computed.root.equals(root) ? proof_ok : fail("inclusion proof does not lead to the root");
}

/** RFC 9162 2.1.4.2: does `proof` show the tree of size1 (root1) is a prefix of size2 (root2)? */
export function verifyConsistency(
  size1: number,
  size2: number,
  proof: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): ProofCheck {
  if (!isIndex(size1) || !isIndex(size2) || size1 > size2) return fail(`size ${size1} is not at most ${size2}`);
  if (!isHash(root1) || !isHash(root2)) return fail("root hash is not 32 bytes");
  if (proof.some((element) => !isHash(element))) return fail("proof element is not 32 bytes");
  if (size1 === size2) {
    if (proof.length !== 0) return fail("proof between equal sizes must be empty");
    return Buffer.from(root1).equals(root2) ? proof_ok : fail("roots of equal sizes differ");
  }
  if (size1 === 0) return proof.length === 0 ? proof_ok : fail("proof from the empty tree must be empty");
  if (proof.length === 0) return fail("proof is empty");
  return consistencyPath(size1, size2, isPowerOfTwo(size1) ? [root1, ...proof] : proof, root1, root2);
}

function consistencyPath(
  size1: number,
  size2: number,
  path: readonly Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): ProofCheck {
  const state = { fn: size1 - 1, sn: size2 - 1 };
  while (state.fn % 2 === 1) shiftOnce(state);
  let first: Buffer = Buffer.from(path[0]!);
  let second: Buffer = Buffer.from(path[0]!);
  for (const node of path.slice(1)) {
    if (state.sn === 0) return fail("proof is longer than the path");
    if (state.fn % 2 === 1 || state.fn === state.sn) {
      first = nodeHash(node, first);
      second = nodeHash(node, second);
      shiftUntilOdd(state);
    } else {
      second = nodeHash(second, node);
    }
    shiftOnce(state);
  }
  if (state.sn !== 0) return fail("proof is shorter than the path");
  if (!first.equals(root1)) return fail("proof does not lead to the first root");
  if (!second.equals(root2)) return fail("proof does not lead to the second root");
  return proof_ok;
}
