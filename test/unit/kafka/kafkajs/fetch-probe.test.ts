import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { UnreadableBatchError } from '../../../../kafka/kafkajs/codecs.js';
import { UnreadableFetchError, UnreadableRecordBatchError, unreadableBatchOf } from '../../../../kafka/kafkajs/fetch-probe.js';
import { skipCommand } from '../../../../host/topic-consumer.js';
import { unreadableCodec } from '../../../../kafka/kafkajs/consumer.js';

// kafkajs' own retrier, as its consumer uses it: a not retriable error is rethrown as
// `new KafkaJSNonRetriableError(e, { cause: e.cause || e })`.
const require = createRequire(import.meta.url);
const createRetry = require('kafkajs/src/retry') as (options: {
  retries: number;
  initialRetryTime: number;
}) => (fn: () => Promise<unknown>) => Promise<unknown>;

async function throughKafkajsRetry(error: Error): Promise<Error> {
  const retry = createRetry({ retries: 2, initialRetryTime: 1 });
  return retry(async () => {
    throw error;
  }).then(
    () => {
      throw new Error('the retrier resolved');
    },
    (wrapped: unknown) => wrapped as Error,
  );
}

const location = { topic: 'network-metrics', partition: 2, baseOffset: '40', lastOffset: '44' };

describe('an unreadable record batch behind kafkajs’ retry wrapping', () => {
  it('keeps its location and codec through the wrap (twice), and the line can name the skip command', async () => {
    // Prepare: what the fetch probe throws for a corrupt lz4 batch
    const codecError = new UnreadableBatchError('lz4', { cause: new Error('bad frame') });
    const thrown = new UnreadableFetchError(new UnreadableRecordBatchError(location, { cause: codecError }));

    // Act
    const once = await throughKafkajsRetry(thrown);
    const twice = await throughKafkajsRetry(once);

    // Assess
    for (const wrapped of [once, twice]) {
      expect(wrapped.name).toBe('KafkaJSNonRetriableError');
      expect(unreadableBatchOf(wrapped)?.location).toEqual(location);
      expect(unreadableCodec(wrapped)).toBe('lz4');
      expect(wrapped.message).toBe(
        'record batch at network-metrics partition 2 offsets 40..44 cannot be read: cannot decompress a record batch compressed with lz4: bad frame',
      );
    }
    expect(skipCommand('network-metrics', 2, '44')).toBe(
      'storage-consumer replay network-metrics --partition 2 --to-offset 45 --allow-skip',
    );
  });

  it('would lose the located error without the outer wrapper: kafkajs keeps only `e.cause || e`', async () => {
    const located = new UnreadableRecordBatchError(location, {
      cause: new UnreadableBatchError('zstd', { cause: new Error('bad magic') }),
    });

    const wrapped = await throughKafkajsRetry(Object.assign(located, { retriable: false }));

    expect(unreadableBatchOf(wrapped)).toBeUndefined();
    expect(unreadableCodec(wrapped)).toBe('zstd');
  });
});
