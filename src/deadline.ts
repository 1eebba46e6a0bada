// A request's time limit as an AbortSignal that is let go with the request, and a wait for a
// promise bounded in time.
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

/**
 * `promise`'s value, or undefined once `ms` have passed without one (its rejection, if it comes
 * first). The promise itself goes on; its timer is cleared once either is known, and keeps no
 * process alive.
 */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
    timer.unref();
  });
  try {
    return await Promise.race([promise, waited]);
  } finally {
    clearTimeout(timer);
  }
}
