/**
 * The one back-off schedule of every retry loop: the database retries of a batch, the host's
 * redeliveries of a failed batch, and the custom resource's response to CloudFormation.
 */

/**
 * The wait before retry number `retry` (1 = the first retry): `baseMs`, 2 x, 4 x ... `baseMs`,
 * never more than `maxMs`.
 */
export function backoffDelayMs(retry: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY): number {
  return Math.min(baseMs * 2 ** Math.max(0, retry - 1), maxMs);
}
