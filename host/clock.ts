/**
 * The host's two clocks. Every bound (unready, fail, stall, half a batch's budget, the heartbeat
 * interval, the lag's age) is a duration, measured on the monotonic clock: an NTP step, an
 * operator's `date -s` or a resumed VM moves the wall clock, never a duration, so no such step
 * changes a verdict. The wall clock is only for timestamps shown to people (status JSON times,
 * log fields, `storage_consumer_last_stored_timestamp_seconds`).
 */
export interface Clock {
  /** Milliseconds on a monotonic clock (`performance.now()`): only differences between two readings mean anything. */
  monotonic(): number;
  /** Milliseconds since the epoch (`Date.now()`): a timestamp for people, never a duration. */
  wall(): number;
}

/** The process's clocks: `performance.now()` (CLOCK_MONOTONIC underneath) and `Date.now()`. */
export const systemClock: Clock = {
  monotonic: () => performance.now(),
  wall: () => Date.now(),
};

/**
 * An instant on the monotonic clock (`performance.now()` plus a duration), as an invocation's
 * deadline is. Branded so that a wall-clock instant (`Date.now() + ms`, 1.8e12 on today's clock)
 * cannot be passed where one is expected: such a deadline would be 55 years away, and a timer
 * set from it overflows and fires at once.
 */
export type MonotonicInstant = number & { readonly clock: 'monotonic' };

/** The monotonic instant `ms` from now on `clock`. */
export function deadlineIn(ms: number, clock: Clock = systemClock): MonotonicInstant {
  return (clock.monotonic() + ms) as MonotonicInstant;
}
