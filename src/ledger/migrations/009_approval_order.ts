// Migration 9: indexes in the order GET /api/v1/approvals pages by (creation time, then id), for
// one state and for all, so a page reads its rows from an index instead of sorting every approval
// the table has ever held. On PostgreSQL the id is in byte order (COLLATE "C"), as the listing
// compares it, so the same rows come in the same order on both backends.

import type { Migration } from "../driver.js";

const indexes = (byte_order: string) => `
CREATE INDEX approvals_by_state_created ON approvals (state, created_at_ms, approval_id${byte_order});
CREATE INDEX approvals_by_created ON approvals (created_at_ms, approval_id${byte_order});
`;

export const migration: Migration = { version: 9, name: "approval_order", sqlite: indexes(""), postgres: indexes(' COLLATE "C"') };
