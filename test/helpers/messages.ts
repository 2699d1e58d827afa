/**
 * The docs/design.md appendix messages (from `dev/sample-messages.ts`), and a way to turn any value into
 * the bytes a Kafka record would carry.
 */
export { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../../dev/sample-messages.js';

/** A record value as a producer writes it: the JSON text of `message`, in UTF-8. */
export function recordValue(message: unknown): Buffer {
  return Buffer.from(JSON.stringify(message), 'utf8');
}
