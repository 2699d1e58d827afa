/**
 * `storage-consumer dlq list`: the dead letters, newest first and filtered, as a table or as JSON
 * (docs/operations.md, "Dead letters").
 */
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import type { DeadLetterSummary } from '../dead-letter-store.js';
import { isTruncated, listDeadLetters } from '../dead-letter-store.js';
import { ellipsis, renderJson, renderTable } from '../output.js';
import { FILTER_OPTIONS, parseFilter } from './dlq-filter.js';

const DEFAULT_LIMIT = 50;

/** `dlq list`: the newest dead letters, filtered. */
export const dlqList = defineCommand({
  name: 'list',
  summary: 'list dead letters, newest first',
  description: `Lists dead letters newest first: id, when stored, pipeline, coordinates (topic-partition@offset),
reason, original payload size (marked "truncated" when only part of it was kept), when it was
re-driven, and the start of the detail (--json carries it whole).`,
  options: {
    ...FILTER_OPTIONS,
    pending: { type: 'boolean', help: 'only the ones not re-driven yet' },
    limit: { type: 'string', value: 'N', help: `at most N (default ${DEFAULT_LIMIT}); the total that matched is always shown` },
    ...jsonOption(),
  },
  async run({ values }, io) {
    const filter = { ...parseFilter(values), pendingOnly: values.pending === true };
    const limit = values.limit === undefined ? DEFAULT_LIMIT : Number(values.limit);
    if (!Number.isSafeInteger(limit) || limit < 1) throw new UsageError(`--limit must be a positive whole number, got ${values.limit}`);
    const { total, letters } = await withDatabase(io, ({ pool }) => listDeadLetters(pool, filter, limit));
    if (values.json === true) {
      io.stdout(
        renderJson({ total, shown: letters.length, letters: letters.map((letter) => ({ ...letter, truncated: isTruncated(letter) })) }),
      );
      return EXIT.ok;
    }
    io.stdout(
      renderTable<DeadLetterSummary>(
        [
          { header: 'ID', value: (letter) => letter.id, align: 'right' },
          { header: 'STORED', value: (letter) => letter.createdAt.toISOString() },
          { header: 'PIPELINE', value: (letter) => letter.pipeline },
          { header: 'COORDINATES', value: (letter) => `${letter.topic}-${letter.partition}@${letter.offset}` },
          { header: 'REASON', value: (letter) => letter.reason },
          { header: 'SIZE', value: (letter) => `${letter.payloadSize}${isTruncated(letter) ? ' truncated' : ''}`, align: 'right' },
          { header: 'REDRIVEN', value: (letter) => letter.redrivenAt?.toISOString() },
          { header: 'DETAIL', value: (letter) => ellipsis(letter.detail) },
        ],
        letters,
      ),
    );
    io.stdout(`${letters.length} of ${total} shown\n`);
    return EXIT.ok;
  },
});
