// Named limits the rules enforce; shared with the ledger so creation and decision agree.

export const amount_min_minor = 100;
export const amount_max_minor = 1_000_000_000;
export const reserved_max_minor = 1_000_000_000_000;
/** The most money a block counts as unreconciled (moved in conflicts, as the provider reports):
 *  far above any block, and with the block's other sums still exact in a JavaScript number. */
export const unreconciled_max_minor = 1_000_000_000_000_000;
export const block_lifetime_max_seconds = 90 * 24 * 3600;
/** A note value of at most 255 characters passes both Razorpay's documented limit (256) and the
 *  simulator's (255, as in Razorpay's error text), so a call the policy allows is not refused by
 *  the provider after its money is held. The agent's receipt travels as the note `buyer_receipt`,
 *  which takes one of the 15 notes Razorpay allows. */
export const receipt_length_max = 255;
/** The note the agent's receipt travels as; an agent's own note of that name is refused under R0. */
export const receipt_note_key = "buyer_receipt";
export const notes_keys_max = 14;
export const note_value_length_max = 255;
export const note_key_length_max = 64;
export const idempotency_key_length_max = 255;
/** Agent names are labels in the console and the log; the server stores them as given. Here,
 *  not in the ledger, so that bursar agent checks --name without loading the ledger. */
export const agent_name_length_max = 128;

/** The currencies a block and a money call may name (active ISO 4217 codes), checked in one place. */
export { currency_codes, currency_pattern, currencyProblem } from "./currencies.js";

export const order_id_pattern = /^order_[A-Za-z0-9]{1,40}$/;
export const payment_id_pattern = /^pay_[A-Za-z0-9]{1,40}$/;

/** The arguments each money tool declares; anything else is refused under R0. */
export const declared_arguments: Readonly<Record<string, readonly string[]>> = Object.freeze({
  create_order: Object.freeze(["amount", "currency", "receipt", "notes", "idempotency_key"]),
  capture_payment: Object.freeze(["payment_id", "amount", "currency", "idempotency_key"]),
});

export const required_arguments: Readonly<Record<string, readonly string[]>> = Object.freeze({
  create_order: Object.freeze(["amount", "currency"]),
  capture_payment: Object.freeze(["payment_id", "amount", "currency"]),
});
