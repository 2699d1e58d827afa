import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import kafkajs from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { toSourceRecord } from '../../../../kafka/kafkajs/source-record.js';
import { installKafkajsWorkarounds } from '../../../../kafka/kafkajs/index.js';
import { encodeWireBatch } from '../../../../kafka/kafkajs/self-check.js';
import { wireRecordOf } from '../../../../kafka/kafkajs/wire-records.js';

// Before kafkajs' record batch decoder is loaded below, as a Fetch response would load it.
installKafkajsWorkarounds();

// kafkajs' own protocol code: the real encoder writes the batch, the real decoder reads it.
const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');

const Decoder = require(join(protocol, 'decoder.js')) as new (buffer: Buffer) => unknown;
const decodeRecordBatch = require(join(protocol, 'recordBatch', 'v0', 'decoder.js')) as (
  decoder: unknown,
) => Promise<{ records: KafkaMessage[] }>;

const HEADERS = [
  ['trace', '1'],
  ['other', '2'],
  ['trace', '3'],
  ['nothing', null],
  ['empty', ''],
] as const;

describe('kafkajs record decoding with wire-order headers', () => {
  it.each([
    ['uncompressed', kafkajs.CompressionTypes.None],
    ['gzip', kafkajs.CompressionTypes.GZIP],
    ['snappy', kafkajs.CompressionTypes.Snappy],
    ['lz4', kafkajs.CompressionTypes.LZ4],
    ['zstd', kafkajs.CompressionTypes.ZSTD],
  ])('keeps trace=1, other=2, trace=3 in that order in a %s batch, and kafkajs’ own fields as they were', async (_label, compression) => {
    // Prepare
    const batch = await encodeWireBatch(
      [
        { offsetDelta: 0, key: 'key-0', value: 'first', headers: HEADERS },
        { offsetDelta: 1, key: 'key-1', value: 'second', headers: [] },
      ],
      compression,
      1_796_018_400_000,
    );

    // Act
    const { records: decoded } = await decodeRecordBatch(new Decoder(batch));

    // Assess
    const [first, second] = decoded as [KafkaMessage, KafkaMessage];
    expect(wireRecordOf(first)).toEqual({
      headers: HEADERS.map(([name, text]) => ({ name, value: text === null ? null : Buffer.from(text) })),
      timestampType: 'CREATE_TIME',
    });
    expect(wireRecordOf(second)).toEqual({ headers: [], timestampType: 'CREATE_TIME' });
    // kafkajs' grouped view is untouched (other code may read it)
    expect(first.headers).toEqual({
      trace: [Buffer.from('1'), Buffer.from('3')],
      other: Buffer.from('2'),
      nothing: null,
      empty: Buffer.alloc(0),
    });
    expect([first.offset, first.value?.toString(), first.key?.toString(), first.timestamp]).toEqual([
      '0',
      'first',
      'key-0',
      '1796018400000',
    ]);
    expect(Object.keys(first)).not.toContain('storage-consumer.kafka-wire-record');
    // and the event the host builds lists them in wire order, a null value as AWS writes it
    expect(toSourceRecord('t', 0, first).headers).toEqual(wireRecordOf(first)?.headers);
  });
});
