import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import kafkajs from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { toSourceRecord } from '../../../../host/batch.js';
import { installKafkajsWorkarounds } from '../../../../host/kafkajs/index.js';
import { wireRecordOf } from '../../../../host/kafkajs/wire-records.js';

// Before kafkajs' record batch decoder is loaded below, as a Fetch response would load it.
installKafkajsWorkarounds();

// kafkajs' own protocol code: the real encoder writes the batch, the real decoder reads it.
const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');

interface KafkajsEncoder {
  writeInt8(value: number): KafkajsEncoder;
  writeVarLong(value: number): KafkajsEncoder;
  writeVarInt(value: number): KafkajsEncoder;
  writeVarIntBytes(value: Buffer | null): KafkajsEncoder;
  writeVarIntArray(array: KafkajsEncoder[]): KafkajsEncoder;
  writeEncoder(value: KafkajsEncoder): KafkajsEncoder;
  size(): number;
  readonly buffer: Buffer;
}
const Encoder = require(join(protocol, 'encoder.js')) as new () => KafkajsEncoder;
const Header = require(join(protocol, 'recordBatch', 'header', 'v0', 'index.js')) as (header: {
  key: string;
  value: Buffer | null;
}) => KafkajsEncoder;
const { RecordBatch } = require(join(protocol, 'recordBatch', 'v0', 'index.js')) as {
  RecordBatch: (batch: {
    compression: number;
    records: KafkajsEncoder[];
    lastOffsetDelta: number;
    firstTimestamp: number;
    maxTimestamp: number;
  }) => Promise<KafkajsEncoder>;
};
const Decoder = require(join(protocol, 'decoder.js')) as new (buffer: Buffer) => unknown;
const decodeRecordBatch = require(join(protocol, 'recordBatch', 'v0', 'decoder.js')) as (
  decoder: unknown,
) => Promise<{ records: KafkaMessage[] }>;

/**
 * One record as the Java client writes it. kafkajs' own record encoder takes headers as an
 * object and so cannot interleave a repeated name; its Encoder writes the wire format as is.
 */
function wireRecord(offsetDelta: number, value: string, headers: ReadonlyArray<readonly [string, string | null]>): KafkajsEncoder {
  const body = new Encoder()
    .writeInt8(0)
    .writeVarLong(0)
    .writeVarInt(offsetDelta)
    .writeVarIntBytes(Buffer.from(`key-${offsetDelta}`))
    .writeVarIntBytes(Buffer.from(value))
    .writeVarIntArray(headers.map(([key, text]) => Header({ key, value: text === null ? null : Buffer.from(text) })));
  return new Encoder().writeVarInt(body.size()).writeEncoder(body);
}

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
    const records = [wireRecord(0, 'first', HEADERS), wireRecord(1, 'second', [])];
    const batch = await RecordBatch({
      compression,
      records,
      lastOffsetDelta: 1,
      firstTimestamp: 1_796_018_400_000,
      maxTimestamp: 1_796_018_400_000,
    });

    // Act
    const { records: decoded } = await decodeRecordBatch(new Decoder(batch.buffer));

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
