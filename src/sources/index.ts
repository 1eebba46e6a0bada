// Evidence sources: their store (create, list, rotate, disable, per-request lookups) and secrets sealed at rest under the master key.

export { SourceStore, source_kinds, type ObserverSource, type SourceKind, type SourceSecrets, type SourceView } from "./store.js";
export { resolveMasterKey, SealError, SecretSealer, master_key_file_name } from "./sealed.js";
