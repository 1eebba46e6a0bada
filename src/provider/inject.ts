// A fetch that answers from a fastify app in the same process (light-my-request), so the
// embedded simulator is reached through the real Razorpay client code, byte for byte, with
// no socket. An AbortSignal still bounds each call, as the client's timeouts expect.

import type { FastifyInstance } from "fastify";

function headerRecord(headers: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  new Headers(headers).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(signal.reason ?? new DOMException("The operation was aborted.", "AbortError"));
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}

function responseHeaders(raw: Record<string, string | string[] | number | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, String(item));
  }
  return headers;
}

export function injectFetch(app: () => FastifyInstance): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    const body = init?.body;
    const injected = app().inject({
      method: (init?.method ?? "GET") as "GET",
      url: url.pathname + url.search,
      headers: headerRecord(init?.headers),
      ...(typeof body === "string" || Buffer.isBuffer(body) ? { payload: body } : {}),
    });
    const signal = init?.signal ?? undefined;
    const response = await (signal ? Promise.race([injected, aborted(signal)]) : injected);
    const empty = response.statusCode === 204 || response.statusCode === 304;
    return new Response(empty ? null : new Uint8Array(response.rawPayload), {
      status: response.statusCode,
      headers: responseHeaders(response.headers as Record<string, string | string[] | number | undefined>),
    });
  }) as typeof fetch;
}
