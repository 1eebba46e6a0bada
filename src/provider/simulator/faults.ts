// Fault knobs for the simulator: request faults on the /v1 API (latency, 5xx, hang, reset) and
// webhook faults (duplicate, out of order, late, drop). Counters ("next N") rather than randomness,
// so a test that sets the same knobs sees the same run; the 5xx rate is a deterministic accumulator.

import { z } from "zod";

/** Every /v1 route, as `only_routes` names them. */
export const simulator_api_routes = [
  "POST /v1/orders",
  "GET /v1/orders",
  "GET /v1/orders/:id",
  "GET /v1/orders/:id/payments",
  "GET /v1/payments/:id",
  "POST /v1/payments/:id/capture",
] as const;
export type SimulatorApiRoute = (typeof simulator_api_routes)[number];

export const fault_count_max = 1_000;
export const fault_latency_max_ms = 60_000;
export const webhook_late_max_ms = 600_000;
const rate_scale = 1_000_000;

const count = z.number().int().min(0).max(fault_count_max);

export const fault_settings_schema = z
  .object({
    /** Added before every matching /v1 request is handled. */
    latency_ms: z.number().int().min(0).max(fault_latency_max_ms),
    /** The next N matching requests answer `error_5xx_status` with Razorpay's SERVER_ERROR body. */
    error_5xx_next: count,
    /** A fraction of matching requests (0..1) answer 5xx: exactly every 1/rate-th one, no randomness. */
    error_5xx_rate: z.number().min(0).max(1),
    error_5xx_status: z.union([z.literal(500), z.literal(502), z.literal(503), z.literal(504)]),
    /** The next N matching requests are refused with Razorpay's 400 BAD_REQUEST_ERROR body, before
     *  taking effect: a proven refusal (e.g. the provider rejecting an order). */
    error_4xx_next: count,
    /** The next N matching requests answer 429 with Razorpay's "Too many requests" body, before
     *  taking effect: rate limited, which says nothing about the order or payment asked about. */
    rate_limit_next: count,
    /** The next N matching requests never answer: the client's timeout decides. */
    timeout_next: count,
    /** The next N matching requests have their connection destroyed. */
    reset_next: count,
    /** Request faults strike after the request took effect (order created, capture done) instead of before. */
    after_processing: z.boolean(),
    /** Request faults strike only these routes; empty means every /v1 route. */
    only_routes: z.array(z.enum(simulator_api_routes)).max(simulator_api_routes.length),
    /** The next N webhook events are delivered twice, same event id and bytes. */
    webhook_duplicate_next: count,
    /** The next N webhook events are held back until a later event has been delivered. */
    webhook_out_of_order_next: count,
    /** The next N webhook events wait `webhook_late_ms` before their first attempt. */
    webhook_late_next: count,
    webhook_late_ms: z.number().int().min(0).max(webhook_late_max_ms),
    /** The next N webhook events are recorded in the outbox as dropped and never sent. */
    webhook_drop_next: count,
  })
  .strict();

export type FaultSettings = z.infer<typeof fault_settings_schema>;
export const fault_settings_patch_schema = fault_settings_schema.partial().strict();
export type FaultSettingsPatch = z.infer<typeof fault_settings_patch_schema>;

export const fault_defaults: FaultSettings = Object.freeze({
  latency_ms: 0,
  error_5xx_next: 0,
  error_5xx_rate: 0,
  error_5xx_status: 500,
  rate_limit_next: 0,
  error_4xx_next: 0,
  timeout_next: 0,
  reset_next: 0,
  after_processing: false,
  only_routes: [],
  webhook_duplicate_next: 0,
  webhook_out_of_order_next: 0,
  webhook_late_next: 0,
  webhook_late_ms: 0,
  webhook_drop_next: 0,
}) as FaultSettings;

export type RequestFault = { kind: "error_5xx"; status: number } | { kind: "error_4xx" } | { kind: "rate_limit" } | { kind: "timeout" } | { kind: "reset" };

export interface WebhookFaults {
  duplicate: boolean;
  out_of_order: boolean;
  late_ms: number;
  drop: boolean;
}

/** What tests and `POST /sim/faults` use. `set` validates and merges; counters count down as they strike. */
export interface FaultControls {
  set(patch: FaultSettingsPatch): FaultSettings;
  get(): FaultSettings;
  reset(): FaultSettings;
}

export class FaultState implements FaultControls {
  private settings: FaultSettings = { ...fault_defaults, only_routes: [] };
  private rate_accumulator = 0;

  set(patch: FaultSettingsPatch): FaultSettings {
    const valid = fault_settings_patch_schema.parse(patch);
    this.settings = { ...this.settings, ...valid };
    if (valid.error_5xx_rate !== undefined) this.rate_accumulator = 0;
    return this.get();
  }

  get(): FaultSettings {
    return { ...this.settings, only_routes: [...this.settings.only_routes] };
  }

  reset(): FaultSettings {
    this.settings = { ...fault_defaults, only_routes: [] };
    this.rate_accumulator = 0;
    return this.get();
  }

  /** The latency for one request on `route`: only_routes restricts it as it restricts every request fault. */
  latencyMs(route: SimulatorApiRoute): number {
    const settings = this.settings;
    return settings.only_routes.length > 0 && !settings.only_routes.includes(route) ? 0 : settings.latency_ms;
  }

  afterProcessing(): boolean {
    return this.settings.after_processing;
  }

  /** Picks (and counts down) the fault for one request; reset beats timeout beats 5xx. */
  takeRequestFault(route: SimulatorApiRoute): RequestFault | null {
    const settings = this.settings;
    if (settings.only_routes.length > 0 && !settings.only_routes.includes(route)) return null;
    if (settings.reset_next > 0) {
      settings.reset_next -= 1;
      return { kind: "reset" };
    }
    if (settings.timeout_next > 0) {
      settings.timeout_next -= 1;
      return { kind: "timeout" };
    }
    if (settings.error_4xx_next > 0) {
      settings.error_4xx_next -= 1;
      return { kind: "error_4xx" };
    }
    if (settings.rate_limit_next > 0) {
      settings.rate_limit_next -= 1;
      return { kind: "rate_limit" };
    }
    if (settings.error_5xx_next > 0) {
      settings.error_5xx_next -= 1;
      return { kind: "error_5xx", status: settings.error_5xx_status };
    }
    if (settings.error_5xx_rate > 0) {
      this.rate_accumulator += Math.round(settings.error_5xx_rate * rate_scale);
      if (this.rate_accumulator >= rate_scale) {
        this.rate_accumulator -= rate_scale;
        return { kind: "error_5xx", status: settings.error_5xx_status };
      }
    }
    return null;
  }

  takeWebhookFaults(): WebhookFaults {
    const settings = this.settings;
    const take = (key: "webhook_duplicate_next" | "webhook_out_of_order_next" | "webhook_late_next" | "webhook_drop_next") => {
      if (settings[key] <= 0) return false;
      settings[key] -= 1;
      return true;
    };
    const drop = take("webhook_drop_next");
    return {
      drop,
      duplicate: !drop && take("webhook_duplicate_next"),
      out_of_order: !drop && take("webhook_out_of_order_next"),
      late_ms: !drop && take("webhook_late_next") ? settings.webhook_late_ms : 0,
    };
  }
}
