// Request bodies are read as sent: a body in a content coding is refused before it is read.

import type { FastifyReply, FastifyRequest } from "fastify";
import { HttpError } from "../errors.js";
import { visibleText } from "../policy/arguments.js";
import { headerOf } from "./validate.js";

/** How much of a refused Content-Encoding header its answer repeats. */
const content_encoding_shown_chars_max = 64;

/**
 * A body in a content coding (gzip, br, …) is refused, 415 with `Accept-Encoding: identity` (RFC
 * 9110 §15.5.16), before it is read: Bursar does not decompress, and hashes and signatures bind
 * the bytes as sent. Read as they came, compressed bytes failed as "not valid UTF-8" or "not
 * JSON" (400), while JSON that only claimed a coding was taken as if it had none. Absent, empty
 * or `identity` is none. (/mcp answers its own 415, in the shape its clients read.)
 */
export async function refuseContentEncoding(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const header = headerOf(request, "content-encoding");
  if (header === undefined || header.split(",").every((coding) => ["", "identity"].includes(coding.trim().toLowerCase()))) return;
  const shown = visibleText(header.trim().slice(0, content_encoding_shown_chars_max));
  reply.header("accept-encoding", "identity");
  throw new HttpError(415, "unsupported_content_encoding", `Content-Encoding ${shown} is not accepted; send the body uncompressed, without a Content-Encoding`, {
    content_encoding: shown,
  });
}
