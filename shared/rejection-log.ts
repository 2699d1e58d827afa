/**
 * The log lines of a batch's dead letters (docs/design.md section 6): a few one by one, the rest in
 * one line grouped by reason, never a payload. process-batch.ts calls it with the letters the batch
 * stored.
 */
import type { DeadLetter } from './dead-letters.js';
import type { CoreLogger } from './logger.js';
import { batchFields } from './batch-report.js';

/**
 * Log volume control (docs/design.md section 6): the first `limit` rejections of a batch are logged one
 * by one (coordinates, reason, detail; never the payload, so no review text reaches the logs),
 * the rest in one line grouped by reason. The table holds everything.
 */
export function logRejections(logger: CoreLogger, letters: readonly DeadLetter[], limit: number): void {
  for (const letter of letters.slice(0, limit)) {
    logger.warn('message dead-lettered', {
      pipeline: letter.pipeline,
      topic: letter.record.topic,
      partition: letter.record.partition,
      offset: letter.record.offset,
      reason: letter.rejection.reason,
      detail: letter.rejection.detail.slice(0, 500),
    });
  }
  if (letters.length <= limit) return;
  const rest = letters.slice(limit);
  const byReason: Record<string, number> = {};
  for (const letter of rest) {
    byReason[letter.rejection.reason] = (byReason[letter.rejection.reason] ?? 0) + 1;
  }
  logger.warn('more messages dead-lettered', { pipeline: letters[0]?.pipeline, count: rest.length, byReason, partitions: placesOf(rest) });
}

/** At most this many offsets per partition are listed in the grouped line (a range and a count always are). */
const LISTED_OFFSETS = 100;

/**
 * Where the letters of the grouped line came from, per topic and partition: the first and last
 * offset, the count and the offsets themselves (up to {@link LISTED_OFFSETS}), so the line can be
 * followed to `dlq list` or `peek` like the single ones.
 */
function placesOf(letters: readonly DeadLetter[]) {
  const places = new Map<string, { topic: string; partition: number; offsets: number[] }>();
  for (const { record } of letters) {
    const key = `${record.topic}\u0000${record.partition}`;
    const place = places.get(key) ?? { topic: record.topic, partition: record.partition, offsets: [] };
    place.offsets.push(record.offset);
    places.set(key, place);
  }
  return [...places.values()].map(({ topic, partition, offsets }) => {
    const sorted = [...offsets].sort((a, b) => a - b);
    return {
      ...batchFields({ topic, partition, firstOffset: String(sorted[0]), lastOffset: String(sorted[sorted.length - 1]) }),
      count: sorted.length,
      offsets: sorted.slice(0, LISTED_OFFSETS).map(String),
    };
  });
}
