/**
 * The one back-off schedule of every retry loop: the database retries of a batch, the host's
 * redeliveries of a failed batch, its offset-commit retries, and the custom resource's response
 * to CloudFormation.
 */

/** A uniform draw in [0, 1): `Math.random` unless a test fixes it. */
export type Random = () => number;

/**
 * The ceiling of the wait before retry number `retry` (1 = the first retry): `baseMs`, 2 x, 4 x
 * ... `baseMs`, never more than `maxMs`.
 */
export function backoffCeilingMs(retry: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY): number {
  return Math.min(baseMs * 2 ** Math.max(0, retry - 1), maxMs);
}

/**
 * The wait before retry number `retry`, with equal jitter: between half of
 * {@link backoffCeilingMs} and all of it (a draw of 0 gives the ceiling), in whole ms. Hosts
 * that failed on the same database at the same moment so spread their retries instead of
 * retrying in lock-step, and no wait is shorter than half the schedule's.
 */
export function backoffDelayMs(retry: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY, random: Random = Math.random): number {
  const ceiling = backoffCeilingMs(retry, baseMs, maxMs);
  return Math.round(ceiling - (ceiling / 2) * Math.min(Math.max(random(), 0), 1));
}
