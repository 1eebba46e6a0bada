// The Razorpay REST client: Basic auth, JSON, a per-request timeout, and the three-way outcome.
// It knows HTTP and Razorpay's error body; translating entities is transformers.ts's job.

import { deadline } from "../../deadline.js";
import { toProviderError, type Parsed } from "./transformers.js";
import type { ProviderOutcome } from "../port.js";

/** How long one provider request may take before its outcome is declared unknown. */
export const provider_timeout_ms = 10_000;
/** A Razorpay answer larger than this is not one we understand. */
export const response_body_max_bytes = 1_048_576;

export type FetchFunction = typeof globalThis.fetch;

export interface RazorpayClientConfig {
  key_id: string;
  key_secret: string;
  base_url: string;
  timeout_ms: number;
  fetch: FetchFunction;
}

export interface RazorpayRequest {
  method: "GET" | "POST";
  /** Already built from fixed segments and encodeURIComponent'ed ids. */
  path: string;
  query?: Record<string, string>;
  body?: Record<string, unknown>;
}

export function buildUrl(base_url: string, path: string, query?: Record<string, string>): string {
  const url = new URL(base_url.replace(/\/+$/, "") + path);
  for (const [key, value] of Object.entries(query ?? {})) url.searchParams.set(key, value);
  return url.toString();
}

function basicAuth(key_id: string, key_secret: string): string {
  return `Basic ${Buffer.from(`${key_id}:${key_secret}`, "utf8").toString("base64")}`;
}

/** A system or undici error code (ECONNREFUSED, UND_ERR_SOCKET, CERT_HAS_EXPIRED): a fixed name, safe to show. */
const error_code_shape = /^[A-Z][A-Z0-9_]{1,63}$/;
/** undici's fixed message for a 3xx answer to a request made with `redirect: "error"`. */
const redirect_refused_message = "unexpected redirect";

/**
 * Names the failure by its error code only. The reason reaches the agent's answer and the
 * evidence log, and an error's message may repeat the request's URL (fetch's "cannot be
 * constructed from a URL that includes credentials: http://user:password@…") or a proxy's text,
 * so no message is echoed; undici's fixed redirect message is compared, not shown.
 */
function describeFetchError(error: unknown, timeout_ms: number): string {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return `no answer within ${timeout_ms} ms`;
  }
  // An answer did arrive: a 3xx, which is not followed (it could send the request, Authorization
  // and all, elsewhere), so whether the provider acted is unknown.
  if ((error as { cause?: { message?: unknown } } | null)?.cause?.message === redirect_refused_message) {
    return "the provider answered with a redirect, which Bursar does not follow";
  }
  const codes = [(error as { cause?: { code?: unknown } } | null)?.cause?.code, (error as { code?: unknown } | null)?.code];
  const code = codes.find((candidate): candidate is string => typeof candidate === "string" && error_code_shape.test(candidate));
  return code === undefined ? "connection failed (no error code)" : `connection failed (${code})`;
}

/** The body's text, read only up to the limit: an answer without Content-Length (chunked) is
 *  cut off there rather than held whole until the timeout. Undefined when it is over. */
async function boundedText(response: Response): Promise<string | undefined> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString("utf8");
    bytes += value.byteLength;
    if (bytes > response_body_max_bytes) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
}

async function readBody(response: Response): Promise<Parsed<unknown>> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  const text = declared > response_body_max_bytes ? undefined : await boundedText(response);
  if (text === undefined) return { ok: false, reason: `answer over ${response_body_max_bytes} bytes` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, reason: "answer is not JSON" };
  }
}

/**
 * 2xx with JSON → ok (raw JSON for the transformer); 4xx with Razorpay's error body → refused;
 * everything else → unknown. A 4xx without Razorpay's body (a proxy page, 408) proves nothing
 * about whether Razorpay acted, so it is unknown too.
 */
async function classify(response: Response): Promise<ProviderOutcome<unknown>> {
  const body = await readBody(response);
  const status = response.status;
  if (status >= 200 && status < 300) {
    return body.ok ? { kind: "ok", value: body.value } : { kind: "unknown", reason: `HTTP ${status}: ${body.reason}` };
  }
  if (status >= 400 && status < 500 && status !== 408 && body.ok) {
    const error = toProviderError(body.value);
    if (error.ok) return { kind: "refused", status, error: error.value };
  }
  return { kind: "unknown", reason: `HTTP ${status} from provider` };
}

export async function razorpayRequest(
  config: RazorpayClientConfig,
  request: RazorpayRequest,
): Promise<ProviderOutcome<unknown>> {
  const headers: Record<string, string> = {
    authorization: basicAuth(config.key_id, config.key_secret),
    accept: "application/json",
  };
  if (request.body) headers["content-type"] = "application/json";
  const limit = deadline(config.timeout_ms, `no answer within ${config.timeout_ms} ms`);
  try {
    const response = await config.fetch(buildUrl(config.base_url, request.path, request.query), {
      method: request.method,
      headers,
      body: request.body ? JSON.stringify(request.body) : undefined,
      signal: limit.signal,
      redirect: "error",
    });
    return await classify(response);
  } catch (error) {
    // Timeouts, resets and refused connections all leave the outcome unknown.
    return { kind: "unknown", reason: describeFetchError(error, config.timeout_ms) };
  } finally {
    limit.release();
  }
}

/** Runs a request and, on a 2xx, the transformer; an answer the transformer rejects is unknown. */
export async function razorpayCall<T>(
  config: RazorpayClientConfig,
  request: RazorpayRequest,
  transform: (json: unknown) => Parsed<T>,
): Promise<ProviderOutcome<T>> {
  const outcome = await razorpayRequest(config, request);
  if (outcome.kind !== "ok") return outcome;
  const value = transform(outcome.value);
  return value.ok ? { kind: "ok", value: value.value } : { kind: "unknown", reason: value.reason };
}
