// The simulator's webhook outbox keeps at most one background pass waiting behind the one
// sending: each event enqueued while a pass ran queued another pass behind it, so under steady
// traffic (a soak: ~3,900 a minute) the backlog of passes and their promises grew for as long as
// events came faster than they were sent.

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WebhookOutbox } from "../../src/provider/simulator/webhooks.js";
import { startReceiver, waitFor, webhook_secret, type WebhookReceiver } from "./support.js";

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => receiver.close());

describe("the webhook outbox", () => {
  it("queues one pass behind a pass still sending, however many events come meanwhile, and sends them all", async () => {
    let open = (): void => undefined;
    const held = new Promise<void>((resolve) => (open = resolve));
    // The receiver answers at once; the first delivery waits until the test lets it go.
    const outbox = new WebhookOutbox({
      secret: webhook_secret,
      url: receiver.url,
      auto_deliver: true,
      retry_base_ms: 20,
      now_iso: () => new Date().toISOString(),
      fetch: async (url, init) => {
        await held;
        return fetch(url, init);
      },
    });
    const passes = vi.spyOn(outbox as unknown as { pump: () => Promise<void> }, "pump");
    const none = { drop: false, duplicate: false, out_of_order: false, late_ms: 0 };
    try {
      const events = 50;
      for (let n = 0; n < events; n++) {
        outbox.enqueue(`evt_Backlog${n}`, "payment.authorized", JSON.stringify({ n }), none);
        // Each event's timer fires while the first pass waits on its delivery.
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      open();
      await waitFor(() => receiver.received.length === events, 10_000, `${events} webhooks`);
      expect(receiver.received.map((webhook) => webhook.event_id)).toEqual(Array.from({ length: events }, (_, n) => `evt_Backlog${n}`));
      // The pass that waited, the one queued behind it, and a last one for anything left.
      expect(passes.mock.calls.length).toBeLessThanOrEqual(3);
    } finally {
      outbox.close();
    }
  });
});
