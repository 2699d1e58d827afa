import fc from 'fast-check';
import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { cutBatch, recordJsonBytes } from '../../../host/event-cut.js';
import { toSourceRecord } from '../../../kafka/kafkajs/source-record.js';
import { redeliveryDelayMs } from '../../../host/batch-loop.js';
import { buildKafkaEvent, eventSizeBytes } from '../../../shared/kafka-event-builder.js';
import { parseKafkaEvent } from '../../../shared/kafka-event.js';

/** What the consumer hands over for `messages` (kafkajs messages, made source records as the adapter does). */
function polled(topic: string, partition: number, messages: readonly KafkaMessage[], lastOffset: string) {
  return { topic, partition, records: messages.map((one) => toSourceRecord(topic, partition, one)), lastOffset };
}

function message(offset: number, value: Buffer | string | null, extra: Partial<KafkaMessage> = {}): KafkaMessage {
  return {
    key: null,
    value: typeof value === 'string' ? Buffer.from(value) : value,
    timestamp: '1764482400000',
    attributes: 0,
    offset: String(offset),
    headers: {},
    ...extra,
  } as KafkaMessage;
}

const source = { eventSource: 'SelfManagedKafka' as const, bootstrapServers: '127.0.0.1:9092' };

describe('recordJsonBytes', () => {
  it('equals the JSON size the event builder produces, for any record', () => {
    const bytes = fc.uint8Array({ maxLength: 64 }).map((array) => Buffer.from(array));
    fc.assert(
      fc.property(
        fc.record({
          topic: fc.stringMatching(/^[a-zA-Z0-9._-]{1,20}$/),
          partition: fc.integer({ min: 0, max: 100_000 }),
          offset: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
          // Any int64 Kafka can carry: -1, beyond 2^53 ... (kafkajs hands them over as strings)
          timestamp: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
          timestampType: fc.constantFrom('CREATE_TIME', 'LOG_APPEND_TIME'),
          key: fc.option(bytes),
          value: fc.option(bytes),
          headers: fc.array(
            fc.record({ name: fc.string({ maxLength: 10 }), value: fc.oneof(bytes, fc.string({ maxLength: 10 }), fc.constant(null)) }),
            { maxLength: 4 },
          ),
        }),
        (record) => {
          // Prepare
          const source = { ...record, offset: String(record.offset), timestamp: String(record.timestamp) };
          const alone = buildKafkaEvent([source]);
          const empty = buildKafkaEvent([]);
          const skeleton = eventSizeBytes(empty) + Buffer.byteLength(JSON.stringify(`${record.topic}-${record.partition}`)) + 3;

          // Act / Assess
          expect(recordJsonBytes(source)).toBe(eventSizeBytes(alone) - skeleton);
        },
      ),
    );
  });
});

describe('cutBatch', () => {
  it('cuts by batch size, in order, one partition per event, each a valid Lambda event', () => {
    // Prepare
    const messages = Array.from({ length: 7 }, (_, index) => message(40 + index, `{"n":${index}}`));

    // Act
    const events = cutBatch(polled('reviews', 2, messages, '46'), { batchSize: 3, maxEventBytes: 6_291_456, source });

    // Assess
    expect(events.map((event) => event.partitions[0]?.offsets)).toEqual([['40', '41', '42'], ['43', '44', '45'], ['46']]);
    expect(events.map((event) => event.partitions[0]?.next)).toEqual(['43', '46', '47']);
    for (const event of events) {
      expect(Object.keys(event.event.records)).toEqual(['reviews-2']);
      expect(event.bytes).toBe(eventSizeBytes(event.event));
      expect(event.event).toMatchObject(source);
      expect(() => parseKafkaEvent(event.event)).not.toThrow();
    }
  });

  it('builds an event when it is first read, once: the event the builder makes of its source records', () => {
    const messages = Array.from({ length: 5 }, (_, index) =>
      message(
        1_000 + index,
        `{"n":${index}}`,
        index === 2 ? ({ key: Buffer.from('k'), headers: { h: Buffer.from('v') } } as Partial<KafkaMessage>) : {},
      ),
    );
    const [first, second] = cutBatch(polled('reviews', 0, messages, '1004'), { batchSize: 3, maxEventBytes: 6_291_456, source });
    expect(first?.event).toBe(first?.event);
    expect(first?.event).toEqual(
      buildKafkaEvent(
        messages.slice(0, 3).map((one) => toSourceRecord('reviews', 0, one)),
        source,
      ),
    );
    expect(second?.event).toEqual(
      buildKafkaEvent(
        messages.slice(3).map((one) => toSourceRecord('reviews', 0, one)),
        source,
      ),
    );
    expect([first?.records, second?.records]).toEqual([3, 2]);
  });

  it('cuts by JSON bytes, never exceeding the cap', () => {
    // Prepare: 1000-byte values (1336 in base64): 3400 bytes of JSON hold two records per event
    const messages = Array.from({ length: 5 }, (_, index) => message(index, 'x'.repeat(1_000)));

    // Act
    const events = cutBatch(polled('t', 0, messages, '4'), { batchSize: 500, maxEventBytes: 3_400, source });

    // Assess
    expect(events.map((event) => event.records)).toEqual([2, 2, 1]);
    for (const event of events) {
      expect(event.bytes).toBe(eventSizeBytes(event.event));
      expect(event.bytes).toBeLessThanOrEqual(3_400);
      expect(event.oversized).toBe(false);
    }
  });

  it('sends a record larger than the cap alone instead of stalling the partition', () => {
    // Prepare
    const messages = [message(0, 'a'), message(1, 'b'.repeat(5_000)), message(2, 'c')];

    // Act
    const events = cutBatch(polled('t', 0, messages, '2'), { batchSize: 500, maxEventBytes: 2_000, source });

    // Assess
    expect(events.map((event) => [event.partitions[0]?.offsets, event.oversized])).toEqual([
      [['0'], false],
      [['1'], true],
      [['2'], false],
    ]);
  });

  it('moves past trailing control records with the last event only', () => {
    // Act: kafkajs says the fetch ended at 9, but the last message is 5
    const events = cutBatch(polled('t', 0, [message(4, 'a'), message(5, 'b')], '9'), { batchSize: 1, maxEventBytes: 6_291_456, source });

    // Assess
    expect(events.map((event) => event.partitions[0]?.next)).toEqual(['5', '10']);
  });

  it('carries keys, null values and repeated headers as the builder would, with signed header bytes', () => {
    // Prepare
    const record = message(7, null, {
      key: Buffer.from('k'),
      headers: { trace: [Buffer.from([0xff, 1]), Buffer.from('b')], empty: undefined },
    } as Partial<KafkaMessage>);

    // Act
    const [event] = cutBatch(polled('t', 1, [record], '7'), { batchSize: 10, maxEventBytes: 6_291_456, source });

    // Assess
    expect(event?.event.records['t-1']).toEqual([
      {
        topic: 't',
        partition: 1,
        offset: 7,
        timestamp: 1764482400000,
        timestampType: 'CREATE_TIME',
        key: Buffer.from('k').toString('base64'),
        value: null,
        headers: [{ trace: [-1, 1] }, { trace: [98] }],
      },
    ]);
    expect(toSourceRecord('t', 1, record).headers).toHaveLength(2);
  });

  it('cuts records with any timestamp into events without throwing; the handler reads the inexact ones as NULL', () => {
    // Prepare
    const timestamps = ['9223372036854775807', '-1', '-9223372036854775808', '9007199254740993', '1764482400000'];
    const messages = timestamps.map((timestamp, index) => message(index, '{}', { timestamp }));

    // Act
    const [hostEvent] = cutBatch(polled('t', 0, messages, '4'), { batchSize: 10, maxEventBytes: 6_291_456, source });

    // Assess
    const parsed = parseKafkaEvent(JSON.parse(JSON.stringify(hostEvent?.event)));
    expect(parsed.map((record) => record.timestamp)).toEqual([null, null, null, null, 1_764_482_400_000]);
    expect(hostEvent?.bytes).toBe(eventSizeBytes(hostEvent!.event));
  });

  it('returns no event for an empty batch', () => {
    expect(cutBatch(polled('t', 0, [], '3'), { batchSize: 1, maxEventBytes: 6_291_456 })).toEqual([]);
  });
});

describe('redeliveryDelayMs', () => {
  it('doubles from the base per consecutive failure and is capped at 60 s', () => {
    const ceiling = () => 0;
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => redeliveryDelayMs(attempt, 1_000, ceiling))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
    ]);
    expect(redeliveryDelayMs(1_000, 1_000, ceiling)).toBe(60_000);
  });

  it('is jittered between half of that and all of it', () => {
    expect(redeliveryDelayMs(7, 1_000, () => 0.999_999)).toBe(30_000);
    expect(redeliveryDelayMs(3, 1_000, () => 0.5)).toBe(3_000);
  });
});
