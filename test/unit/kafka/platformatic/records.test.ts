import { createRecordsBatch, readRecordsBatches, Reader } from '@platformatic/kafka';
import type { KafkaRecord, RecordsBatch } from '@platformatic/kafka';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sourceRecords } from '../../../../kafka/platformatic/records.js';

// Batches as @platformatic/kafka decodes a fetch answer, made by hand where the client's own
// encoder cannot make them (control batches, LOG_APPEND_TIME, null header values), and once by its
// encoder and decoder.

const TRANSACTIONAL = 0x10;
const CONTROL = 0x20;
const LOG_APPEND_TIME = 0x08;

function record(offsetDelta: number, fields: Partial<KafkaRecord> = {}): KafkaRecord {
  return {
    length: 0,
    attributes: 0,
    timestampDelta: BigInt(offsetDelta),
    offsetDelta,
    key: Buffer.from(`k${offsetDelta}`),
    value: Buffer.from(`v${offsetDelta}`),
    headers: [],
    ...fields,
  };
}

function batch(firstOffset: bigint, records: KafkaRecord[], fields: Partial<RecordsBatch> = {}): RecordsBatch {
  return {
    firstOffset,
    length: 0,
    partitionLeaderEpoch: 0,
    magic: 2,
    crc: 0,
    attributes: 0,
    lastOffsetDelta: records.at(-1)?.offsetDelta ?? 0,
    firstTimestamp: 1_700_000_000_000n,
    maxTimestamp: 1_700_000_000_000n,
    producerId: -1n,
    producerEpoch: -1,
    firstSequence: -1,
    records,
    ...fields,
  };
}

/** A transaction marker of `producerId` at `offset`: a control batch of one record whose key says ABORT (0) or COMMIT (1). */
function marker(offset: bigint, producerId: bigint, type: 'ABORT' | 'COMMIT'): RecordsBatch {
  const key = Buffer.alloc(4);
  key.writeInt16BE(0, 0);
  key.writeInt16BE(type === 'ABORT' ? 0 : 1, 2);
  return batch(offset, [record(0, { key, value: Buffer.alloc(6), headers: [] })], {
    attributes: TRANSACTIONAL | CONTROL,
    producerId,
  });
}

const offsetsOf = (records: ReadonlyArray<{ offset: string | number }>) => records.map(({ offset }) => String(offset));

describe('sourceRecords: a platformatic fetch answer as source records', () => {
  it('drops the records before the fetch offset and keeps keys, values and headers as they were, nulls included', () => {
    // Prepare: the answer starts with the whole batch that holds offset 12
    const headers: Array<[Buffer | null, Buffer | null]> = [
      [Buffer.from('trace'), Buffer.from('1')],
      [Buffer.from('other'), null],
      [Buffer.from('trace'), Buffer.from('3')],
    ];
    const batches = [batch(10n, [record(0), record(1), record(2, { key: null, value: null, headers }), record(3)])];

    // Act
    const { records, lastOffset } = sourceRecords('reviews', 4, batches, 12n);

    // Assess
    expect(offsetsOf(records)).toEqual(['12', '13']);
    expect(records[0]).toEqual({
      topic: 'reviews',
      partition: 4,
      offset: '12',
      timestamp: '1700000000002',
      timestampType: 'CREATE_TIME',
      key: null,
      value: null,
      headers: [
        { name: 'trace', value: Buffer.from('1') },
        { name: 'other', value: null },
        { name: 'trace', value: Buffer.from('3') },
      ],
    });
    expect(lastOffset).toBe(13n);
  });

  it('keeps an int64 timestamp beyond 2^53 exact, and takes the batch time under LOG_APPEND_TIME', () => {
    // Prepare
    const big = 2n ** 62n + 12_345n;
    const created = batch(0n, [record(0, { timestampDelta: 0n }), record(1, { timestampDelta: 7n })], { firstTimestamp: big });
    const appended = batch(2n, [record(0, { timestampDelta: 5n })], {
      attributes: LOG_APPEND_TIME,
      firstTimestamp: 1n,
      maxTimestamp: big + 1n,
    });

    // Act
    const { records } = sourceRecords('t', 0, [created, appended], 0n);

    // Assess
    expect(records.map(({ timestamp, timestampType }) => [timestamp, timestampType])).toEqual([
      [big.toString(), 'CREATE_TIME'],
      [(big + 7n).toString(), 'CREATE_TIME'],
      [(big + 1n).toString(), 'LOG_APPEND_TIME'],
    ]);
    expect(records[1]?.timestamp).toBe('4611686018427400256');
  });

  it('skips gaps and a trailing control batch, whose offsets still move the last offset', () => {
    // Prepare: offsets 3 and 4 were compacted away; a commit marker ends the answer at 8
    const batches = [
      batch(0n, [record(0), record(1), record(2)], { attributes: TRANSACTIONAL, producerId: 7n }),
      batch(5n, [record(0), record(2)], { attributes: TRANSACTIONAL, producerId: 7n }),
      marker(8n, 7n, 'COMMIT'),
    ];

    // Act
    const { records, lastOffset } = sourceRecords('t', 0, batches, 0n, []);

    // Assess
    expect(offsetsOf(records)).toEqual(['0', '1', '2', '5', '7']);
    expect(lastOffset).toBe(8n);
  });

  it('leaves an aborted transaction out up to its abort marker, and keeps the other producer and what follows', () => {
    // Prepare: producer 7 aborts the transaction started at 2; producer 9 commits beside it
    const batches = [
      batch(0n, [record(0), record(1)], { attributes: TRANSACTIONAL, producerId: 7n }),
      marker(2n, 7n, 'COMMIT'),
      batch(3n, [record(0), record(1)], { attributes: TRANSACTIONAL, producerId: 7n }),
      batch(5n, [record(0)], { attributes: TRANSACTIONAL, producerId: 9n }),
      batch(6n, [record(0)], { attributes: TRANSACTIONAL, producerId: 7n }),
      marker(7n, 7n, 'ABORT'),
      batch(8n, [record(0)], { attributes: TRANSACTIONAL, producerId: 7n }),
      marker(9n, 7n, 'COMMIT'),
      marker(10n, 9n, 'COMMIT'),
    ];
    const aborted = [{ producerId: 7n, firstOffset: 3n }];

    // Act
    const committed = sourceRecords('t', 0, batches, 0n, aborted);
    const uncommitted = sourceRecords('t', 0, batches, 0n);

    // Assess
    expect(offsetsOf(committed.records)).toEqual(['0', '1', '5', '8']);
    expect(committed.lastOffset).toBe(10n);
    expect(offsetsOf(uncommitted.records)).toEqual(['0', '1', '3', '4', '5', '6', '8']);
  });

  it('reads what the client itself encoded and decoded, duplicate header names in wire order', () => {
    // Prepare: Map keys are compared by identity, so two Buffers named 'trace' are two headers
    const headers = new Map<Buffer, Buffer>([
      [Buffer.from('trace'), Buffer.from('a')],
      [Buffer.from('other'), Buffer.from('b')],
      [Buffer.from('trace'), Buffer.from('c')],
    ]);
    const encoded = createRecordsBatch(
      [
        { topic: 't', key: Buffer.from('k'), value: Buffer.from('one'), headers, timestamp: 2n ** 60n },
        { topic: 't', value: Buffer.from('two'), timestamp: 2n ** 60n + 3n },
      ],
      { compression: 'none' },
    ).buffer;
    const batches = readRecordsBatches(Reader.from(encoded)).map((decoded) => ({ ...decoded, firstOffset: 40n }));

    // Act
    const { records, lastOffset } = sourceRecords('t', 1, batches, 40n, []);

    // Assess
    expect(records.map(({ offset, timestamp, value }) => [offset, timestamp, value?.toString()])).toEqual([
      ['40', (2n ** 60n).toString(), 'one'],
      ['41', (2n ** 60n + 3n).toString(), 'two'],
    ]);
    expect(records[0]?.headers?.map(({ name, value }) => `${name}=${value?.toString()}`)).toEqual(['trace=a', 'other=b', 'trace=c']);
    expect(lastOffset).toBe(41n);
  });

  it('returns every data record at or after the fetch offset once, in order, whatever the batches, gaps and markers', () => {
    // Prepare: batches of random sizes and gaps, some control batches, any fetch offset
    const layout = fc.array(
      fc.record({ gap: fc.nat(3), deltas: fc.uniqueArray(fc.nat(6), { minLength: 1, maxLength: 5 }), control: fc.boolean() }),
      { maxLength: 8 },
    );

    fc.assert(
      fc.property(layout, fc.nat(40), (shapes, from) => {
        let next = 0n;
        const batches: RecordsBatch[] = [];
        const expected: string[] = [];
        for (const { gap, deltas, control } of shapes) {
          const first = next + BigInt(gap);
          const sorted = [...deltas].sort((a, b) => a - b);
          batches.push(
            control
              ? marker(first, 1n, 'COMMIT')
              : batch(
                  first,
                  sorted.map((delta) => record(delta)),
                ),
          );
          const last = control ? first : first + BigInt(sorted.at(-1) ?? 0);
          if (!control)
            for (const delta of sorted) if (first + BigInt(delta) >= BigInt(from)) expected.push((first + BigInt(delta)).toString());
          next = last + 1n;
        }

        // Act
        const { records, lastOffset } = sourceRecords('t', 0, batches, BigInt(from), []);

        // Assess
        expect(offsetsOf(records)).toEqual(expected);
        expect(lastOffset).toBe(batches.length === 0 ? null : next - 1n);
      }),
    );
  });

  it('keeps exactly the records of committed transactions and plain producers, however two producers’ transactions interleave', () => {
    // Prepare: a log written by steps of producers 1 and 2 (transactional) and 0 (plain); every
    // transaction still open at the end commits, as the broker answers only up to the stable offset
    const step = fc.record({ producer: fc.constantFrom(0n, 1n, 2n), action: fc.constantFrom('send', 'send', 'commit', 'abort') });

    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), fc.nat(60), (steps, from) => {
        const batches: RecordsBatch[] = [];
        const aborted: Array<{ producerId: bigint; firstOffset: bigint }> = [];
        const open = new Map<bigint, { first: bigint; offsets: bigint[] }>();
        const kept: bigint[] = [];
        let next = 0n;
        const end = (producer: bigint, type: 'ABORT' | 'COMMIT') => {
          const transaction = open.get(producer);
          if (transaction === undefined) return;
          batches.push(marker(next, producer, type));
          next += 1n;
          if (type === 'ABORT') aborted.push({ producerId: producer, firstOffset: transaction.first });
          else kept.push(...transaction.offsets);
          open.delete(producer);
        };
        for (const { producer, action } of [...steps, ...[1n, 2n].map((producer) => ({ producer, action: 'commit' }))]) {
          if (action === 'send') {
            const written = batch(next, [record(0), record(1)], producer === 0n ? {} : { attributes: TRANSACTIONAL, producerId: producer });
            batches.push(written);
            const offsets = [next, next + 1n];
            next += 2n;
            if (producer === 0n) kept.push(...offsets);
            else {
              const transaction = open.get(producer) ?? { first: offsets[0]!, offsets: [] };
              transaction.offsets.push(...offsets);
              open.set(producer, transaction);
            }
          } else if (producer !== 0n) end(producer, action === 'abort' ? 'ABORT' : 'COMMIT');
        }
        const expected = kept
          .filter((offset) => offset >= BigInt(from))
          .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
          .map(String);

        // Act
        const { records } = sourceRecords('t', 0, batches, BigInt(from), aborted);

        // Assess
        expect(offsetsOf(records)).toEqual(expected);
      }),
    );
  });
});
