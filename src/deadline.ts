// A request's time limit as an AbortSignal that is let go with the request.
//
// AbortSignal.timeout keeps its timer for the whole limit however soon the request is answered,
// then builds an error and fires an abort event for it. AbortSignal.any on a long-lived signal (a
// command's interrupt, a sender's shutdown) is worse on Node 20: the long-lived signal keeps an
// entry for every signal made from it, about 75 bytes a request for the life of the process.

export interface Deadline {
  /** Aborts once `ms` pass (a TimeoutError DOMException) or when the parent aborts (its reason). */
  signal: AbortSignal;
  /** Clears the timer and stops listening to the parent; call it once the answer is read (the
   *  timer does both if it is never called). */
  release: () => void;
}

/** A signal for one request, aborting after `ms` with `message` as its TimeoutError, or with `parent`. */
export function deadline(ms: number, message: string, parent?: AbortSignal): Deadline {
  const controller = new AbortController();
  if (parent?.aborted) controller.abort(parent.reason);
  const onParent = () => controller.abort(parent?.reason);
  parent?.addEventListener("abort", onParent, { once: true });
  const release = () => {
    clearTimeout(timer);
    parent?.removeEventListener("abort", onParent);
  };
  // Unreleased, it still lets go of the parent when its time is up.
  const timer = setTimeout(() => {
    release();
    controller.abort(new DOMException(message, "TimeoutError"));
  }, ms);
  // As AbortSignal.timeout's: the request it bounds keeps the process alive, not the timer.
  timer.unref();
  return { signal: controller.signal, release };
}
