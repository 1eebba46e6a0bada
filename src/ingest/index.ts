// Decision-record ingestion: the gateway-decision schema, Bursar-Signature checks, delivery splitting and validation, the one-transaction store, and the turns deliveries take to be stored.

export { decision_record_schema, decision_schema_ids, decisionJsonSchema, type DecisionRecord } from "./schema.js";
export { delivery_bytes_max, records_per_delivery_max, splitDelivery, type ReceivedRecord, type SplitDelivery } from "./delivery.js";
export { signature_header, signature_tolerance_seconds, signatureHeader, verifySignature, SignatureError } from "./signature.js";
export { approvalVerified, validateRecords, type RecordProblem, type ValidRecord } from "./validate.js";
export { ingestDelivery, type IngestAnswer, type IngestDependencies } from "./ingest.js";
export { deliveries_busy_retry_after_seconds, deliveries_in_progress_max, deliveries_waiting_max, delivery_turns, DeliveryTurns, type DeliveryTurnsGauge } from "./turns.js";
