import { randomBytes } from 'node:crypto';
import kafkajs from 'kafkajs';
import { compressSync as rawSnappy } from 'snappy';
import { describe, expect, it } from 'vitest';
import { PROJECT_CODECS, UnreadableBatchError, snappyCompressXerial, snappyDecompress } from '../../../../kafka/kafkajs/codecs.js';
import { installKafkajsWorkarounds } from '../../../../kafka/kafkajs/index.js';
import { unreadableCodec } from '../../../../kafka/kafkajs/consumer.js';

installKafkajsWorkarounds();

const { CompressionCodecs, CompressionTypes, KafkaJSNotImplemented } = kafkajs;
const codecOf = (id: number) =>
  (CompressionCodecs as Record<number, () => { compress(e: { buffer: Buffer }): Promise<Buffer>; decompress(b: Buffer): Promise<Buffer> }>)[
    id
  ]?.();

// Compressible and incompressible parts, larger than one xerial block (32 KiB).
const payload = Buffer.concat([Buffer.from('{"review_id":"gp:1","content":"' + 'forecast '.repeat(8_000) + '"}'), randomBytes(40_000)]);

describe('kafka codecs', () => {
  it.each([
    ['gzip', CompressionTypes.GZIP],
    ['snappy', CompressionTypes.Snappy],
    ['lz4', CompressionTypes.LZ4],
    ['zstd', CompressionTypes.ZSTD],
  ])('registers %s in kafkajs’ shared table once installed, and reads back what it writes', async (_name, id) => {
    // Prepare
    const codec = codecOf(id);

    // Act
    const compressed = await codec!.compress({ buffer: payload });
    const restored = await codec!.decompress(compressed);

    // Assess
    expect(CompressionCodecs[id as keyof typeof CompressionCodecs]).toBe(PROJECT_CODECS[id]);
    expect(compressed.length).toBeLessThan(payload.length);
    expect(restored.equals(payload)).toBe(true);
  });

  it('reads snappy framed the Java (xerial) way, in several blocks, and as one raw block (librdkafka)', () => {
    // Prepare
    const framed = snappyCompressXerial(payload);
    const raw = rawSnappy(payload);

    // Act / Assess
    expect(framed.subarray(0, 8)).toEqual(Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]));
    expect(snappyDecompress(framed).equals(payload)).toBe(true);
    expect(snappyDecompress(raw).equals(payload)).toBe(true);
  });

  it.each([
    ['gzip', CompressionTypes.GZIP],
    ['snappy', CompressionTypes.Snappy],
    ['lz4', CompressionTypes.LZ4],
    ['zstd', CompressionTypes.ZSTD],
  ])('fails a %s batch it cannot read with an UnreadableBatchError naming the codec, not retriable', async (name, id) => {
    // Prepare
    const garbage = Buffer.from('definitely not a compressed record batch');

    // Act
    const error = await codecOf(id)!
      .decompress(garbage)
      .catch((caught: unknown) => caught);

    // Assess
    expect(error).toBeInstanceOf(UnreadableBatchError);
    expect(error).toMatchObject({ codec: name, retriable: false });
    expect((error as Error).message).toContain(`compressed with ${name}`);
  });

  it.each([5, 6, 7])('refuses codec id %i, which Kafka does not define, instead of reading it as uncompressed', async (id) => {
    // Act
    const error = await Promise.resolve()
      .then(() => codecOf(id)!.decompress(Buffer.from('x')))
      .catch((caught: unknown) => caught);

    // Assess
    expect(error).toBeInstanceOf(UnreadableBatchError);
    expect((error as Error).message).toContain(`codec id ${id}`);
  });

  it('names the codec of a consumer crash, ours or kafkajs’ own placeholder, even behind a retry wrapper', () => {
    // Prepare
    const ours = new UnreadableBatchError('lz4', { cause: new Error('bad frame') });
    // What kafkajs' own table throws for snappy (its typings omit the constructor's message)
    const stock = new (KafkaJSNotImplemented as unknown as new (message: string) => Error)('Snappy compression not implemented');
    const wrapped = Object.assign(new Error('retries exhausted', { cause: stock }), { name: 'KafkaJSNumberOfRetriesExceeded' });

    // Act / Assess
    expect(unreadableCodec(ours)).toBe('lz4');
    expect(unreadableCodec(stock)).toBe('snappy');
    expect(unreadableCodec(wrapped)).toBe('snappy');
    expect(unreadableCodec(new Error('Connection error: ECONNREFUSED'))).toBeUndefined();
  });
});
