import type { DeadLetter } from './dead-letters.js';
import type { CoreLogger } from './logger.js';

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
  const byReason: Record<string, number> = {};
  for (const letter of letters.slice(limit)) {
    byReason[letter.rejection.reason] = (byReason[letter.rejection.reason] ?? 0) + 1;
  }
  logger.warn('more messages dead-lettered', { pipeline: letters[0]?.pipeline, count: letters.length - limit, byReason });
}
