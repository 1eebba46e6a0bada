// A Provider whose target is set once the server knows its own address: the mounted
// simulator's base URL contains the port, which exists only after listen.

import type { Provider } from "./port.js";

export interface DeferredProvider extends Provider {
  bind(target: Provider): void;
}

export function deferredProvider(): DeferredProvider {
  let target: Provider | undefined;
  const current = (): Provider => {
    if (!target) throw new Error("the provider is not bound yet (the server has not started listening)");
    return target;
  };
  return {
    name: "razorpay",
    bind: (provider) => {
      target = provider;
    },
    createOrder: (input) => current().createOrder(input),
    capturePayment: (payment_id, input) => current().capturePayment(payment_id, input),
    fetchOrder: (order_id) => current().fetchOrder(order_id),
    fetchPayment: (payment_id) => current().fetchPayment(payment_id),
    fetchOrderPayments: (order_id) => current().fetchOrderPayments(order_id),
    findOrdersByReceipt: (receipt) => current().findOrdersByReceipt(receipt),
    verifyWebhook: (raw_body, signature) => current().verifyWebhook(raw_body, signature),
    parseWebhook: (raw_body) => current().parseWebhook(raw_body),
  };
}
