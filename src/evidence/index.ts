// The evidence log: canonical JSON, Merkle tree, signed notes and checkpoints, receipts, proofs, scrubbing, storage, export and offline verify.

export { canonical_depth_max, canonicalJson, canonicalSha256Hex, hasLoneSurrogate, isHexSha256, sha256, sha256Hex, CanonicalJsonError } from "./canonical.js";
export {
  buildEntry,
  entry_bytes_max,
  entry_kinds,
  entryShapeProblem,
  EntryTooLargeError,
  EvidenceInputError,
  isEntryKind,
  type AppendInput,
  type Entry,
} from "./entry.js";
export { exportLog, export_format_version, type ExportHeader, type ExportOptions, type ExportSummary } from "./export.js";
export {
  createLogSigner,
  ForeignSigningKeyError,
  generateSigningKeyPem,
  loadSigningKey,
  resolveSigningKey,
  signing_key_file_name,
  SigningKeyError,
  type LoadedSigningKey,
  type LogSigner,
  type SigningKeyLocation,
} from "./keys.js";
export {
  CompactRange,
  emptyRoot,
  leafHash,
  MerkleTree,
  nodeHash,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
  type ProofCheck,
} from "./merkle.js";
export {
  formatCheckpoint,
  formatVerifierKey,
  keyId,
  openCheckpoint,
  openNote,
  parseCheckpoint,
  parseNote,
  parseSignerKey,
  parseVerifierKey,
  signNote,
  NoteError,
  type CheckpointBody,
  type NoteSigner,
  type NoteVerifier,
  type OpenedNote,
  type SignedCheckpoint,
} from "./note.js";
export {
  checkConsistencyDocument,
  checkInclusionDocument,
  consistencyProofSchema,
  inclusionProofSchema,
  type ConsistencyProofDocument,
  type InclusionProofDocument,
} from "./proof.js";
export {
  jsonListBytes,
  records_per_delivery_max,
  signDeliveryReceipt,
  signReceiptFields,
  verifyDeliveryReceipt,
  verifyReceipt,
  type DeliveryReceipt,
  type DeliveryReceiptFields,
  type DeliveryRecord,
  type LogIdentity,
  type Receipt,
  type ReceiptFields,
} from "./receipt.js";
export { isSecretKeyName, isSecretValue, luhnValid, redacted, scrub, scrubbedCanonicalJson, scrubCounting, withoutSecretKeys } from "./scrub.js";
export {
  append_batch_max,
  checkpoint_every_default,
  checkpoint_seconds_default,
  entries_page_max,
  EvidenceIntegrityError,
  EvidenceLog,
  EvidenceRangeError,
  readLatestCheckpoint,
  readNewestEntryTime,
  readTreeSize,
  type AppendResult,
  type SignedAppendResult,
  type EvidenceLogOptions,
  type StoredCheckpoint,
  type StoredEntry,
} from "./store.js";
export { fileWitness, keptCheckpointOf, last_checkpoint_file_name, LogRolledBackError, WitnessError, type CheckpointWitness, type KeptCheckpoint } from "./witness.js";
export { bufferLines, fileLines, verifyExport, verifyExportFile, verifyExportLines, type VerifyFailure, type VerifyOptions, type VerifyReport } from "./verify.js";
