// Every schema migration in version order; both drivers apply the same list.

import type { Migration } from "../driver.js";
import { migration as ledger } from "./001_ledger.js";
import { migration as evidence } from "./002_evidence.js";
import { migration as access } from "./003_access.js";
import { migration as sources } from "./004_sources.js";
import { migration as unreconciled } from "./005_unreconciled.js";
import { migration as log_head_per_statement } from "./006_log_head_per_statement.js";
import { migration as partial_indexes } from "./007_partial_indexes.js";
import { migration as agent_disable } from "./008_agent_disable.js";

export const migrations: readonly Migration[] = Object.freeze([ledger, evidence, access, sources, unreconciled, log_head_per_statement, partial_indexes, agent_disable]);
