// The ledger: the storage port, its SQLite implementation, migrations, and the Ledger itself.

export * from "./driver.js";
export { SqliteDriver } from "./sqlite.js";
export { migrations } from "./migrations/index.js";
export { Ledger, type Agent, type Inbox, type InboxCounts } from "./ledger.js";
export { checkLifetimes, ledger_defaults, lifetime_ms_max, record, type EvidenceRef, type EvidenceWriter, type LedgerContext } from "./context.js";
export { block_defaults, type CreateBlockInput } from "./blocks.js";
export type { AuthorizeInput, AuthorizeResult } from "./authorize.js";
export { sentKey, type SentKey } from "./keys.js";
export { payment_not_asked } from "./payment-matters.js";
export type { CallRef, Completion, ForwardOutcome, OrderRecord } from "./complete.js";
export { isCapture, type CapturedPayment, type SettleOutcome, type SettleVia } from "./settle.js";
export * from "./rows.js";
