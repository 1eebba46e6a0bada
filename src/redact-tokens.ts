// Taking the tokens a client sent (operator token, agent token, model API key) out of text it
// prints: a server, or fetch's own messages, may quote them back.

/** What stands in a printed text for a token the command sent. */
export const redaction = "[redacted]";

/**
 * The shortest token `redacted` takes out. A shorter one is no secret (a local model endpoint's
 * placeholder key, `x`), and taking it out would take its letters out of every word: a key `k`
 * made `api-key` read `api-[redacted]ey`.
 */
export const redacted_token_chars_min = 8;

/**
 * `text` with each token the command sent (operator token, agent token, model API key) of at
 * least redacted_token_chars_min characters replaced by [redacted]: whatever server --url
 * reaches may quote the Authorization header back in its error text, and fetch's own messages
 * can quote it too.
 */
export function redacted(text: string, tokens: ReadonlyArray<string | undefined>): string {
  let shown = text;
  for (const token of tokens) {
    if (!token || token.length < redacted_token_chars_min) continue;
    // As sent, and as a JSON string writes it: a token may hold `"` or `\` (token_shape allows any visible ASCII).
    for (const form of new Set([token, JSON.stringify(token).slice(1, -1)])) shown = shown.split(form).join(redaction);
  }
  return shown;
}
