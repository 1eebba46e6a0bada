// Known-answer tests for the RFC 6962 tree against the transparency-dev/merkle vectors,
// corruption probes on those proofs, and a property test over random trees.

import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CompactRange,
  emptyRoot,
  leafHash,
  MerkleTree,
  nodeHash,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
} from "../../src/evidence/merkle.js";

interface Vectors {
  hasher: Record<string, string>;
  leaves: string[];
  roots: string[];
  inclusion: { leaf: number; size: number; proof: string[] }[];
  consistency: { size1: number; size2: number; proof: string[] }[];
  testdata_consistency_happy_path_1_8_base64: { size1: number; size2: number; root1: string; root2: string; proof: string[] };
}

const vectors = JSON.parse(readFileSync(new URL("./fixtures/rfc6962-vectors.json", import.meta.url), "utf8")) as Vectors;
const hex = (value: string) => Buffer.from(value, "hex");
const leafHashes = vectors.leaves.map((leaf) => leafHash(hex(leaf)));
const root = (size: number) => hex(vectors.roots[size - 1]!);

function treeOf(leaves: Buffer[]): MerkleTree {
  const tree = new MerkleTree();
  for (const leaf of leaves) tree.append(leaf);
  return tree;
}

describe("RFC 6962 hashing matches the published vectors", () => {
  it("hashes the empty tree, the empty leaf, a leaf and a node", () => {
    expect(emptyRoot().toString("hex")).toBe(vectors.hasher.empty_root);
    expect(leafHash(Buffer.alloc(0)).toString("hex")).toBe(vectors.hasher.empty_leaf);
    expect(leafHash(Buffer.from("L123456")).toString("hex")).toBe(vectors.hasher.leaf_L123456);
    expect(nodeHash(Buffer.from("N123"), Buffer.from("N456")).toString("hex")).toBe(vectors.hasher.node_N123_N456);
  });

  it("computes every published root for sizes 1..8, in the cache and in a compact range", () => {
    const tree = treeOf(leafHashes);
    const range = new CompactRange();
    for (let size = 1; size <= 8; size++) {
      range.append(leafHashes[size - 1]!);
      expect(tree.root(size).toString("hex")).toBe(vectors.roots[size - 1]);
      expect(range.root().toString("hex")).toBe(vectors.roots[size - 1]);
    }
    expect(new MerkleTree().root(0).equals(emptyRoot())).toBe(true);
  });
});

describe("inclusion proofs match the published vectors", () => {
  const tree = treeOf(leafHashes);
  for (const vector of vectors.inclusion) {
    const index = vector.leaf - 1;
    it(`generates and verifies leaf ${index} in size ${vector.size}`, () => {
      const proof = vector.proof.map(hex);
      expect(tree.inclusionProof(index, vector.size).map((h) => h.toString("hex"))).toEqual(vector.proof);
      expect(verifyInclusion(index, vector.size, leafHashes[index]!, proof, root(vector.size))).toEqual({ ok: true });
      const computed = rootFromInclusionProof(index, vector.size, leafHashes[index]!, proof);
      expect("root" in computed && computed.root.equals(root(vector.size))).toBe(true);
    });

    it(`rejects corrupted variants of leaf ${index} in size ${vector.size}`, () => {
      const proof = vector.proof.map(hex);
      const leaf = leafHashes[index]!;
      const good = root(vector.size);
      const probes: [number, number, Buffer, Buffer[], Buffer][] = [
        [index - 1, vector.size, leaf, proof, good],
        [index + 1, vector.size, leaf, proof, good],
        [index ^ 2, vector.size, leaf, proof, good],
        [index, vector.size * 2, leaf, proof, good],
        [index, Math.floor(vector.size / 2), leaf, proof, good],
        [index, vector.size, Buffer.from("WrongLeaf"), proof, good],
        [index, vector.size, leaf, proof, emptyRoot()],
        [index, vector.size, leaf, [...proof, Buffer.alloc(0)], good],
        [index, vector.size, leaf, [...proof, good], good],
        [index, vector.size, leaf, [Buffer.alloc(0), ...proof], good],
        [index, vector.size, leaf, [good, ...proof], good],
      ];
      proof.forEach((_, i) => {
        const flipped = proof.map((h) => Buffer.from(h));
        flipped[i]![0]! ^= 8;
        probes.push([index, vector.size, leaf, flipped, good]);
      });
      if (proof.length > 0) probes.push([index, vector.size, leaf, proof.slice(0, -1), good]);
      for (const [i, size, l, p, r] of probes) expect(verifyInclusion(i, size, l, p, r).ok).toBe(false);
    });
  }
});

describe("consistency proofs match the published vectors", () => {
  const tree = treeOf(leafHashes);
  for (const vector of vectors.consistency) {
    it(`generates and verifies ${vector.size1} -> ${vector.size2}`, () => {
      const proof = vector.proof.map(hex);
      if (vector.size1 !== vector.size2) {
        expect(tree.consistencyProof(vector.size1, vector.size2).map((h) => h.toString("hex"))).toEqual(vector.proof);
      }
      expect(verifyConsistency(vector.size1, vector.size2, proof, root(vector.size1), root(vector.size2))).toEqual({ ok: true });
    });

    if (vector.proof.length === 0) continue;
    it(`rejects corrupted variants of ${vector.size1} -> ${vector.size2}`, () => {
      const proof = vector.proof.map(hex);
      const [s1, s2, r1, r2] = [vector.size1, vector.size2, root(vector.size1), root(vector.size2)];
      const probes: [number, number, Buffer[], Buffer, Buffer][] = [
        [s1 - 1, s2, proof, r1, r2],
        [s1 + 1, s2, proof, r1, r2],
        [s1 ^ 2, s2, proof, r1, r2],
        [s1, s2 * 2, proof, r1, r2],
        [s1, Math.floor(s2 / 2), proof, r1, r2],
        [s1, s2, proof, Buffer.from("WrongRoot"), r2],
        [s1, s2, proof, r1, Buffer.from("WrongRoot")],
        [s1, s2, proof, r2, r1],
        [s1, s2, [], r1, r2],
        [s1, s2, [...proof, Buffer.alloc(0)], r1, r2],
        [s1, s2, [...proof, r1], r1, r2],
        [s1, s2, [...proof, r2], r1, r2],
        [s1, s2, [Buffer.alloc(0), ...proof], r1, r2],
        [s1, s2, [r1, ...proof], r1, r2],
        [s1, s2, [r2, ...proof], r1, r2],
        [s1, s2, [proof[0]!, ...proof], r1, r2],
        [s1, s2, proof.slice(0, -1), r1, r2],
      ];
      proof.forEach((_, i) => {
        const flipped = proof.map((h) => Buffer.from(h));
        flipped[i]![0]! ^= 16;
        probes.push([s1, s2, flipped, r1, r2]);
      });
      for (const [a, b, p, x, y] of probes) expect(verifyConsistency(a, b, p, x, y).ok).toBe(false);
    });
  }

  it("accepts the trivially consistent cases and refuses the published bad ones", () => {
    const [r1, r2, e] = [Buffer.alloc(32, 1), Buffer.alloc(32, 2), emptyRoot()];
    expect(verifyConsistency(0, 0, [], r1, r1).ok).toBe(true);
    expect(verifyConsistency(0, 1, [], r1, r2).ok).toBe(true);
    expect(verifyConsistency(1, 1, [], r2, r2).ok).toBe(true);
    expect(verifyConsistency(1, 1, [], r1, r2).ok).toBe(false);
    expect(verifyConsistency(1, 0, [], r1, r2).ok).toBe(false);
    expect(verifyConsistency(2, 1, [], r1, r2).ok).toBe(false);
    expect(verifyConsistency(1, 2, [], r1, r2).ok).toBe(false);
    expect(verifyConsistency(0, 0, [e], e, e).ok).toBe(false);
    expect(verifyConsistency(0, 1, [e], e, e).ok).toBe(false);
    expect(verifyConsistency(1, 1, [e], e, e).ok).toBe(false);
  });

  it("verifies the base64 testdata happy path", () => {
    const v = vectors.testdata_consistency_happy_path_1_8_base64;
    const b64 = (s: string) => Buffer.from(s, "base64");
    expect(verifyConsistency(v.size1, v.size2, v.proof.map(b64), b64(v.root1), b64(v.root2)).ok).toBe(true);
  });
});

describe("random trees of size 1..2000", () => {
  it("sampled inclusion and consistency proofs verify; a mutated leaf's proof does not", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.array(fc.tuple(fc.nat(), fc.nat(), fc.nat()), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 0, max: 255 }),
        (size, samples, salt) => {
          const leaves = Array.from({ length: size }, (_, i) => leafHash(`leaf ${salt} ${i}`));
          const tree = treeOf(leaves);
          for (const [a, b, c] of samples) {
            const treeSize = 1 + (a % size);
            const index = b % treeSize;
            const root = tree.root(treeSize);
            const proof = tree.inclusionProof(index, treeSize);
            expect(verifyInclusion(index, treeSize, leaves[index]!, proof, root).ok).toBe(true);
            expect(verifyInclusion(index, treeSize, leafHash(`mutated ${index}`), proof, root).ok).toBe(false);
            const from = 1 + (c % treeSize);
            const consistency = tree.consistencyProof(from, treeSize);
            expect(verifyConsistency(from, treeSize, consistency, tree.root(from), root).ok).toBe(true);
            const mutated = [...leaves.slice(0, treeSize)];
            mutated[index] = leafHash(`mutated ${index}`);
            const other = treeOf(mutated);
            if (index < from) expect(verifyConsistency(from, treeSize, consistency, other.root(from), root).ok).toBe(false);
            expect(verifyConsistency(from, treeSize, consistency, tree.root(from), other.root(treeSize)).ok).toBe(false);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
