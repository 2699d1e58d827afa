import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SourceRecord } from '../../../shared/kafka-event-builder.js';
import { buildKafkaEvent } from '../../../shared/kafka-event-builder.js';
import type { KafkaEventRecord } from '../../../shared/kafka-event.js';
import { parseKafkaEvent } from '../../../shared/kafka-event.js';
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('buildKafkaEvent', () => {
  const source = (overrides: Partial<SourceRecord> = {}): SourceRecord => ({
    topic: 'app-stats',
    partition: 1,
    offset: '17',
    timestamp: '1796018400000',
    key: Buffer.from('com.example.weather'),
    value: Buffer.from('{"package_name":"com.example.weather"}'),
    headers: [],
    ...overrides,
  });

  it('builds the event AWS would send: grouped by partition, base64, signed header bytes', () => {
    // Prepare
    const records = [
      source({ headers: [{ name: 'trace', value: Buffer.from([0x00, 0x7f, 0x80, 0xff]) }] }),
      source({ partition: 0, offset: '3', key: null, value: null }),
      source({ offset: '18', timestampType: 'LOG_APPEND_TIME', headers: [{ name: 'empty', value: null }] }),
    ];

    // Act
    const event = buildKafkaEvent(records, { eventSource: 'aws:kafka', eventSourceArn: 'arn:aws:kafka:x', bootstrapServers: 'b-1:9098' });

    // Assess
    expect(event).toEqual({
      eventSource: 'aws:kafka',
      eventSourceArn: 'arn:aws:kafka:x',
      bootstrapServers: 'b-1:9098',
      records: {
        'app-stats-1': [
          {
            topic: 'app-stats',
            partition: 1,
            offset: 17,
            timestamp: 1_796_018_400_000,
            timestampType: 'CREATE_TIME',
            key: b64('com.example.weather'),
            value: b64('{"package_name":"com.example.weather"}'),
            headers: [{ trace: [0, 127, -128, -1] }],
          },
          {
            topic: 'app-stats',
            partition: 1,
            offset: 18,
            timestamp: 1_796_018_400_000,
            timestampType: 'LOG_APPEND_TIME',
            key: b64('com.example.weather'),
            value: b64('{"package_name":"com.example.weather"}'),
            headers: [{}],
          },
        ],
        'app-stats-0': [
          {
            topic: 'app-stats',
            partition: 0,
            offset: 3,
            timestamp: 1_796_018_400_000,
            timestampType: 'CREATE_TIME',
            value: null,
            headers: [],
          },
        ],
      },
    });
  });

  it('claims to be self-managed Kafka by default', () => {
    // Act
    const event = buildKafkaEvent([source()]);

    // Assess
    expect(event.eventSource).toBe('SelfManagedKafka');
    expect(event).not.toHaveProperty('eventSourceArn');
  });

  it('carries the largest safe offset given as a string exactly', () => {
    // Prepare
    const records = [source({ offset: '9007199254740991' })];

    // Act
    const [record] = parseKafkaEvent(buildKafkaEvent(records));

    // Assess
    expect(record?.offset).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each([
    ["-1, Kafka's none", '-1', -1],
    ['the largest int64, which only AWS can write exactly', '9223372036854775807', 2 ** 63],
    ['the smallest int64', '-9223372036854775808', -(2 ** 63)],
    ['2^53 + 1', '9007199254740993', 9007199254740992],
    ['not a number', 'soon', -1],
    ['empty', '', -1],
  ])('carries timestamp %s as AWS would, never throwing, and the parser reads it as NULL', (_label, timestamp, carried) => {
    // Act
    const event = buildKafkaEvent([source({ timestamp })]);
    const [record] = parseKafkaEvent(JSON.parse(JSON.stringify(event)));

    // Assess
    expect(event.records['app-stats-1']?.[0]?.timestamp).toBe(carried);
    expect(record?.timestamp).toBeNull();
  });

  it.each([
    ['2^53', '9007199254740992'],
    ['2^53 + 1, which would round to 2^53', '9007199254740993'],
    ['not a number', '12abc'],
    ['a fraction', '12.5'],
    ['an exponent', '1e3'],
  ])('refuses offset %s rather than rounding it', (_label, offset) => {
    // Act
    const action = () => buildKafkaEvent([source({ offset })]);

    // Assess
    expect(action).toThrow(RangeError);
  });

  it('round-trips any records through parseKafkaEvent: bytes, headers, offsets and order exact', () => {
    const bytes = fc.uint8Array({ maxLength: 64 }).map((array) => Buffer.from(array));
    const recordArbitrary = fc.record({
      partition: fc.integer({ min: 0, max: 2 }),
      offset: fc.bigInt({ min: 0n, max: BigInt(Number.MAX_SAFE_INTEGER) }).map(String),
      timestamp: fc.integer({ min: 0, max: 4_102_444_800_000 }).map(String),
      key: fc.option(bytes, { nil: null }),
      value: fc.option(bytes, { nil: null }),
      headers: fc.array(fc.record({ name: fc.string({ minLength: 1, maxLength: 8 }), value: bytes }), { maxLength: 4 }),
    });

    fc.assert(
      fc.property(fc.array(recordArbitrary, { maxLength: 8 }), (generated) => {
        // Prepare
        const records: SourceRecord[] = generated.map((record) => ({ topic: 'reviews', ...record }));

        // Act
        const event = buildKafkaEvent(records);
        const parsed = parseKafkaEvent(JSON.parse(JSON.stringify(event)));

        // Assess: every header byte travels signed, and everything comes back as it was
        for (const list of Object.values(event.records)) {
          for (const record of list ?? []) {
            for (const header of record.headers ?? []) {
              for (const values of Object.values(header)) expect(values.every((byte) => byte >= -128 && byte <= 127)).toBe(true);
            }
          }
        }
        expect(parsed).toEqual(
          byPartitionFirstSeen(records).map((record) => ({
            topic: 'reviews',
            partition: record.partition,
            offset: Number(record.offset),
            timestamp: Number(record.timestamp),
            timestampType: 'CREATE_TIME',
            key: record.key,
            value: record.value,
            headers: (record.headers ?? []).map((header) => ({ name: header.name, value: header.value })),
          })),
        );
      }),
    );
  });

  it('with carryBytes: the same event, and the parse takes the bytes it was built from', () => {
    const bytes = fc.uint8Array({ maxLength: 64 }).map((array) => Buffer.from(array));
    const recordArbitrary = fc.record({
      partition: fc.integer({ min: 0, max: 2 }),
      offset: fc.bigInt({ min: 0n, max: BigInt(Number.MAX_SAFE_INTEGER) }).map(String),
      timestamp: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
      timestampType: fc.constantFrom('CREATE_TIME', 'LOG_APPEND_TIME'),
      key: fc.option(bytes, { nil: null }),
      value: fc.option(bytes, { nil: null }),
      headers: fc.array(fc.record({ name: fc.string({ maxLength: 8 }), value: fc.option(bytes, { nil: null }) }), { maxLength: 3 }),
    });

    fc.assert(
      fc.property(fc.array(recordArbitrary, { maxLength: 8 }), (generated) => {
        // Prepare
        const records: SourceRecord[] = generated.map((record) => ({ topic: 'reviews', ...record }));
        const from = { eventSource: 'aws:kafka', bootstrapServers: 'b-1:9098' } as const;

        // Act
        const carried = buildKafkaEvent(records, from, { carryBytes: true });
        const parsed = parseKafkaEvent(carried);

        // Assess: the same JSON and fields as the plain event, the same parse as its JSON's, with
        // the source's own Buffers (no base64 decoded back)
        const plain = buildKafkaEvent(records, from);
        expect(JSON.stringify(carried)).toBe(JSON.stringify(plain));
        expect(carried).toEqual(plain);
        expect(parsed).toEqual(parseKafkaEvent(JSON.parse(JSON.stringify(plain))));
        const ordered = byPartitionFirstSeen(records);
        parsed.forEach((record, index) => {
          expect(record.value).toBe(ordered[index]?.value);
          expect(record.key).toBe(ordered[index]?.key);
        });
      }),
    );
  });

  it('with carryBytes: a record changed after the build, or a copy of the list, is parsed from its text', () => {
    // Prepare
    const first = source();
    const second = source({ offset: '18' });
    const event = buildKafkaEvent([first, second], {}, { carryBytes: true });
    const list = event.records['app-stats-1'] as KafkaEventRecord[];
    (list[1] as { value: string | null }).value = b64('{"package_name":"com.example.other"}');
    const copied = JSON.parse(JSON.stringify(event)) as typeof event;

    // Act
    const [kept, changed] = parseKafkaEvent(event);
    const [copy] = parseKafkaEvent(copied);

    // Assess
    expect(kept?.value).toBe(first.value);
    expect(changed?.value?.toString('utf8')).toBe('{"package_name":"com.example.other"}');
    expect(changed?.key).toBe(second.key);
    expect(copy?.value).not.toBe(first.value);
    expect(copy?.value).toEqual(first.value);
  });
});

/** Records grouped by partition (stable), partitions in first-seen order. */
function byPartitionFirstSeen(records: readonly SourceRecord[]): SourceRecord[] {
  const groups = new Map<number, SourceRecord[]>();
  for (const record of records) {
    const group = groups.get(record.partition) ?? [];
    group.push(record);
    groups.set(record.partition, group);
  }
  return [...groups.values()].flat();
}
