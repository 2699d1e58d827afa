import { describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../../shared/dead-letters.js';
import { logRejections } from '../../../shared/rejection-log.js';
import { captureLogger } from '../../helpers/lambda-events.js';

function letter(partition: number, offset: number): DeadLetter {
  return {
    pipeline: 'reviews',
    record: { topic: 'reviews', partition, offset, timestamp: 0, timestampType: 'CREATE_TIME', key: null, value: null, headers: [] },
    rejection: { reason: 'invalid_message', detail: 'score: must be 1 to 5' },
  } as unknown as DeadLetter;
}

describe('logRejections', () => {
  it('logs the first letters one by one and the rest in one line that names partitions and offsets', () => {
    const logger = captureLogger();
    const letters = [letter(0, 3), letter(0, 4), letter(1, 9), letter(2, 20), letter(0, 7), letter(1, 2), letter(0, 5)];

    logRejections(logger, letters, 3);

    expect(logger.lines.filter((line) => line.message === 'message dead-lettered').map((line) => line.extra.offset)).toEqual([3, 4, 9]);
    const more = logger.lines.find((line) => line.message === 'more messages dead-lettered');
    expect(more?.extra).toEqual({
      pipeline: 'reviews',
      count: 4,
      byReason: { invalid_message: 4 },
      partitions: [
        { topic: 'reviews', partition: 2, first_offset: '20', last_offset: '20', count: 1, offsets: ['20'] },
        { topic: 'reviews', partition: 0, first_offset: '5', last_offset: '7', count: 2, offsets: ['5', '7'] },
        { topic: 'reviews', partition: 1, first_offset: '2', last_offset: '2', count: 1, offsets: ['2'] },
      ],
    });
  });

  it('lists at most 100 offsets per partition but keeps the range and the count exact', () => {
    const logger = captureLogger();
    const letters = Array.from({ length: 1_205 }, (_, index) => letter(0, 1_000 + index));

    logRejections(logger, letters, 5);

    const more = logger.lines.find((line) => line.message === 'more messages dead-lettered')?.extra as {
      partitions: Array<{ first_offset: string; last_offset: string; count: number; offsets: string[] }>;
    };
    expect(more.partitions).toHaveLength(1);
    expect(more.partitions[0]).toMatchObject({ first_offset: '1005', last_offset: '2204', count: 1_200 });
    expect(more.partitions[0]?.offsets).toHaveLength(100);
    expect(more.partitions[0]?.offsets[99]).toBe('1104');
  });
});
