/**
 * The one bounded wait of the project: every "answer within N ms or give up" (a readiness ping,
 * the status endpoint's broker view, a lag reading, the CLI's peek) goes through it, so each
 * clears its timer and none keeps the process alive.
 */

/** What {@link within} resolves with when the bound passed first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * Waits for `work` at most `ms` milliseconds: resolves or rejects as `work` does, or resolves
 * {@link TIMED_OUT} when the bound passes first. The work itself is not cancelled (the caller
 * decides what a late answer means); its late rejection is not left unhandled.
 */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
    timer.unref();
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}
