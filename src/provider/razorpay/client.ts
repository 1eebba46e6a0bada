// The Razorpay REST client: Basic auth, JSON, a per-request timeout, and the three-way outcome.
// It knows HTTP and Razorpay's error body; translating entities is transformers.ts's job.

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

/** Names the failure without echoing anything the request carried (no credentials in reasons). */
function describeFetchError(error: unknown, timeout_ms: number): string {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return `no answer within ${timeout_ms} ms`;
  }
  const cause = error instanceof Error ? (error as Error & { cause?: { code?: string; message?: string } }).cause : undefined;
  const detail = cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
  return `connection failed (${detail})`;
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
  const signal = AbortSignal.timeout(config.timeout_ms);
  try {
    const response = await config.fetch(buildUrl(config.base_url, request.path, request.query), {
      method: request.method,
      headers,
      body: request.body ? JSON.stringify(request.body) : undefined,
      signal,
      redirect: "error",
    });
    return await classify(response);
  } catch (error) {
    // Timeouts, resets and refused connections all leave the outcome unknown.
    return { kind: "unknown", reason: describeFetchError(error, config.timeout_ms) };
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
