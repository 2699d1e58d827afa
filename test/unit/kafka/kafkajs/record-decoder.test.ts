import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeRecordFast } from '../../../../kafka/kafkajs/record-decoder.js';
import type { RecordBatchContext } from '../../../../kafka/kafkajs/record-decoder.js';
import { installedRecordDecoders, wireRecordOf } from '../../../../kafka/kafkajs/wire-records.js';

// The installed record decoder against kafkajs' own on the same bytes: generated records (every
// field over its whole range, repeated and odd header names), the same cut short or with a
// length that lies, and random bytes. Both must return equal records and wire records, or throw
// the same error.

const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');
const Decoder = require(join(protocol, 'decoder.js')) as new (buffer: Buffer) => unknown;
type Decode = (decoder: never, context?: RecordBatchContext) => Record<PropertyKey, unknown>;
const decoders = installedRecordDecoders() as unknown as { installed: Decode; kafkajs: Decode };

const UINT64 = (1n << 64n) - 1n;

function unsignedVarint(value: bigint): number[] {
  const bytes: number[] = [];
  let rest = value;
  do {
    const low = Number(rest & 0x7fn);
    rest >>= 7n;
    bytes.push(rest > 0n ? low | 0x80 : low);
  } while (rest > 0n);
  return bytes;
}
/** A zig-zag varint of a 32-bit integer, as kafkajs' encoder writes it. */
const varInt = (value: number): number[] => unsignedVarint(BigInt(((value << 1) ^ (value >> 31)) >>> 0));
/** A zig-zag varlong of a 64-bit integer. */
const varLong = (value: bigint): number[] => unsignedVarint(((value << 1n) ^ (value >> 63n)) & UINT64);
const varBytes = (bytes: Uint8Array | null): number[] => (bytes === null ? varInt(-1) : [...varInt(bytes.length), ...bytes]);

interface GeneratedRecord {
  readonly attributes: number;
  readonly timestampDelta: bigint;
  readonly offsetDelta: number;
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
  readonly headers: ReadonlyArray<{ readonly name: string | null; readonly value: Uint8Array | null }>;
}

function recordBytes(record: GeneratedRecord): Buffer {
  const nameBytes = (name: string | null) => (name === null ? null : Buffer.from(name, 'utf8'));
  return Buffer.from([
    record.attributes & 0xff,
    ...varLong(record.timestampDelta),
    ...varInt(record.offsetDelta),
    ...varBytes(record.key),
    ...varBytes(record.value),
    ...varInt(record.headers.length),
    ...record.headers.flatMap((header) => [...varBytes(nameBytes(header.name)), ...varBytes(header.value)]),
  ]);
}

const bytesOrNull = fc.option(fc.uint8Array({ maxLength: 40 }), { freq: 4 });
const generatedRecord: fc.Arbitrary<GeneratedRecord> = fc.record({
  attributes: fc.integer({ min: -128, max: 127 }),
  timestampDelta: fc.oneof(
    fc.bigInt({ min: -(2n ** 20n), max: 2n ** 20n }),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    fc.constantFrom(2n ** 47n, -(2n ** 47n), 2n ** 48n, 2n ** 53n),
  ),
  offsetDelta: fc.oneof(fc.integer({ min: -1000, max: 100_000 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })),
  key: bytesOrNull,
  value: bytesOrNull,
  headers: fc.array(
    fc.record({
      name: fc.option(fc.oneof(fc.constantFrom('trace', 'other', '__proto__', 'constructor', 'null', ''), fc.string({ unit: 'binary' })), {
        freq: 8,
      }),
      value: bytesOrNull,
    }),
    { maxLength: 6 },
  ),
});

const int64Text = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 40n }),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  fc.constantFrom(-1n, 0n, 2n ** 53n - 1n, 2n ** 53n, 1_796_018_400_000n),
);
const batchContext: fc.Arbitrary<RecordBatchContext> = fc.record({
  firstOffset: int64Text.map(String),
  firstTimestamp: int64Text.map(String),
  magicByte: fc.constant(2),
  isControlBatch: fc.boolean(),
  timestampType: fc.constantFrom(0, 1),
  maxTimestamp: int64Text.map(String),
});

type Outcome = { readonly record: Record<PropertyKey, unknown>; readonly wire: unknown } | { readonly error: string };

function outcome(decode: Decode, bytes: Buffer, context: RecordBatchContext): Outcome {
  try {
    const record = decode(new Decoder(bytes) as never, context);
    return { record, wire: wireRecordOf(record as unknown as KafkaMessage) };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

/**
 * The header count kafkajs reads from `bytes` (past the end it reads zeros, as kafkajs does). A
 * count in the millions makes kafkajs' own decoder loop that many times past the end, then fold
 * the headers in quadratic time: such inputs are left out (see the closing assertion).
 */
function headerCount(bytes: Buffer): number {
  let at = 1;
  // kafkajs' readVarInt, wrapping at 32 bits as it does; past the end a byte reads as 0.
  const varint = (): number => {
    let result = 0;
    let byte: number | undefined;
    let shift = 0;
    do {
      byte = bytes[at++];
      result += ((byte ?? 0) & 0x7f) << shift;
      shift += 7;
    } while (byte !== undefined && byte >= 0x80);
    return (result >>> 1) ^ -(result & 1);
  };
  while ((bytes[at++] ?? 0) >= 0x80); // the timestamp delta
  varint();
  for (let i = 0; i < 2; i += 1) {
    const length = varint();
    if (length !== -1) at += length;
  }
  return varint();
}

function expectSameAsKafkajs(bytes: Buffer, context: RecordBatchContext): void {
  if (headerCount(bytes) > 1_000) return;
  expect(outcome(decoders.installed, bytes, context)).toEqual(outcome(decoders.kafkajs, bytes, context));
}

describe('the installed record decoder', () => {
  it('returns what kafkajs returns for generated records, and decodes the safe ones itself', () => {
    fc.assert(
      fc.property(generatedRecord, batchContext, (record, context) => {
        const bytes = recordBytes(record);
        expectSameAsKafkajs(bytes, context);
        const safe =
          record.timestampDelta > -(2n ** 47n) &&
          record.timestampDelta < 2n ** 47n &&
          Math.abs(record.offsetDelta) < 2 ** 26 &&
          [Number(context.firstOffset), Number(context.firstOffset) + record.offsetDelta].every(Number.isSafeInteger) &&
          (context.timestampType === 1 ||
            [Number(context.firstTimestamp), Number(context.firstTimestamp) + Number(record.timestampDelta)].every(Number.isSafeInteger));
        if (safe) expect(decodeRecordFast(new Decoder(bytes) as never, context)).toBeDefined();
      }),
      { numRuns: 3000 },
    );
  }, 60_000);

  it('returns what kafkajs returns for records cut short or with a length that lies', () => {
    fc.assert(
      fc.property(generatedRecord, batchContext, fc.nat(), fc.integer({ min: -3, max: 300 }), (record, context, cut, lie) => {
        const bytes = recordBytes(record);
        expectSameAsKafkajs(bytes.subarray(0, cut % (bytes.length + 1)), context);
        // The value's length replaced: longer than what follows, negative, or zero.
        const lying = recordBytes({ ...record, value: null });
        const at = 1 + varLong(record.timestampDelta).length + varInt(record.offsetDelta).length + varBytes(record.key).length;
        expectSameAsKafkajs(Buffer.concat([lying.subarray(0, at), Buffer.from(varInt(lie)), lying.subarray(at + 1)]), context);
      }),
      { numRuns: 2000 },
    );
  }, 60_000);

  it('returns what kafkajs returns for random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), batchContext, (bytes, context) => {
        expectSameAsKafkajs(Buffer.from(bytes), context);
      }),
      { numRuns: 3000 },
    );
  }, 60_000);

  it('reads a record of a real batch the same way: offsets and timestamps past 2^53 go to kafkajs', () => {
    const record = recordBytes({ attributes: 0, timestampDelta: 5n, offsetDelta: 7, key: null, value: Buffer.from('v'), headers: [] });
    const near = { firstOffset: String(2 ** 53 - 8), firstTimestamp: '1796018400000', timestampType: 0, maxTimestamp: '0' };
    expect(decodeRecordFast(new Decoder(record) as never, near)?.record).toMatchObject({
      offset: String(2 ** 53 - 1),
      timestamp: '1796018400005',
    });
    const past = { ...near, firstOffset: String(2 ** 53 - 7) };
    expect(decodeRecordFast(new Decoder(record) as never, past)).toBeUndefined();
    expect(outcome(decoders.installed, record, past)).toMatchObject({ record: { offset: '9007199254740992' } });
  });
  it('gives records without headers one shared, frozen headers object and wire record; a record with headers its own', () => {
    const context = { firstOffset: '100', firstTimestamp: '1796018400000', timestampType: 0, maxTimestamp: '0' };
    const plain = recordBytes({ attributes: 0, timestampDelta: 1n, offsetDelta: 0, key: null, value: Buffer.from('a'), headers: [] });
    const other = recordBytes({ attributes: 0, timestampDelta: 2n, offsetDelta: 1, key: Buffer.from('k'), value: null, headers: [] });
    const first = decodeRecordFast(new Decoder(plain) as never, context);
    const second = decodeRecordFast(new Decoder(other) as never, context);
    expect(first?.record.headers).toBe(second?.record.headers);
    expect(first?.wire).toBe(second?.wire);
    expect(first?.wire).toEqual({ headers: [], timestampType: 'CREATE_TIME' });
    // Shared, so a write must fail loudly rather than reach every other record.
    expect(() => {
      (first?.record.headers as Record<string, unknown>).added = 1;
    }).toThrow(TypeError);
    expect(() => (first?.wire.headers as unknown[]).push({ name: 'x', value: null })).toThrow(TypeError);
    const appended = decodeRecordFast(new Decoder(plain) as never, { ...context, timestampType: 1, maxTimestamp: '1796018409999' });
    expect(appended?.wire).toEqual({ headers: [], timestampType: 'LOG_APPEND_TIME' });
    expect(appended?.record.timestamp).toBe('1796018409999');

    const withHeaders = recordBytes({
      attributes: 0,
      timestampDelta: 3n,
      offsetDelta: 2,
      key: null,
      value: Buffer.from('b'),
      headers: [{ name: 'trace', value: Buffer.from('1') }],
    });
    const own = decodeRecordFast(new Decoder(withHeaders) as never, context);
    expect(own?.wire).not.toBe(first?.wire);
    expect(own?.wire.headers).toEqual([{ name: 'trace', value: Buffer.from('1') }]);
    expect(own?.record.headers).toEqual({ trace: Buffer.from('1') });
    expect(Object.isFrozen(own?.record.headers)).toBe(false);
  });
});
