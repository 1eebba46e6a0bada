// Decision-record ingestion: the gateway-decision schema, Bursar-Signature checks, delivery splitting and validation, and the one-transaction store.

export { decision_record_schema, decision_schema_ids, decisionJsonSchema, type DecisionRecord } from "./schema.js";
export { delivery_bytes_max, records_per_delivery_max, splitDelivery, type ReceivedRecord, type SplitDelivery } from "./delivery.js";
export { signature_header, signature_tolerance_seconds, signatureHeader, verifySignature, SignatureError } from "./signature.js";
export { approvalVerified, validateRecords, type RecordProblem, type ValidRecord } from "./validate.js";
export { ingestDelivery, type IngestAnswer, type IngestDependencies } from "./ingest.js";
