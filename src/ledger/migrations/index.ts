// Every schema migration in version order; both drivers apply the same list.

import type { Migration } from "../driver.js";
import { migration as ledger } from "./001_ledger.js";

export const migrations: readonly Migration[] = Object.freeze([ledger]);
