import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidEventError } from '../../../shared/errors.js';
import { offsetRanges, parseKafkaEvent, partitionKey } from '../../../shared/kafka-event.js';
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/** One record as AWS puts it in the event, with overridable fields. */
function awsRecord(overrides: Record<string, unknown> = {}) {
  return {
    topic: 'reviews',
    partition: 2,
    offset: 1234,
    timestamp: 1_796_018_400_000,
    timestampType: 'CREATE_TIME',
    key: b64('gp:AOqpTOEx3k1s9QeV'),
    value: b64('{"review_id":"gp:AOqpTOEx3k1s9QeV"}'),
    headers: [{ 'content-type': [97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110] }],
    ...overrides,
  };
}

function awsEvent(records: Record<string, unknown[]>) {
  return {
    eventSource: 'aws:kafka',
    eventSourceArn: 'arn:aws:kafka:eu-west-1:000000000000:cluster/storage/abc',
    bootstrapServers: 'b-1.storage.kafka.eu-west-1.amazonaws.com:9098',
    records,
  };
}

function invalidEventFrom(event: unknown): InvalidEventError {
  try {
    parseKafkaEvent(event);
  } catch (error) {
    if (error instanceof InvalidEventError) return error;
    throw error;
  }
  throw new Error('expected the event to be refused');
}

describe('parseKafkaEvent', () => {
  it('reads an MSK event as AWS sends it', () => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord()] });

    // Act
    const [record, ...others] = parseKafkaEvent(event);

    // Assess
    expect(others).toEqual([]);
    expect(record).toEqual({
      topic: 'reviews',
      partition: 2,
      offset: 1234,
      timestamp: 1_796_018_400_000,
      timestampType: 'CREATE_TIME',
      key: Buffer.from('gp:AOqpTOEx3k1s9QeV'),
      value: Buffer.from('{"review_id":"gp:AOqpTOEx3k1s9QeV"}'),
      headers: [{ name: 'content-type', value: Buffer.from('application/json') }],
    });
  });

  it('accepts a self-managed Kafka event', () => {
    // Prepare
    const event = { eventSource: 'SelfManagedKafka', bootstrapServers: 'kafka:9092', records: { 'reviews-2': [awsRecord()] } };

    // Act
    const records = parseKafkaEvent(event);

    // Assess
    expect(records.map((record) => record.offset)).toEqual([1234]);
  });

  it.each([
    ['an SQS event', 'aws:sqs'],
    ['a Kinesis event', 'aws:kinesis'],
    ['a lower-case self-managed source', 'selfmanagedkafka'],
    ['no event source', null],
  ])('refuses %s', (_label, eventSource) => {
    // Prepare
    const { eventSource: _default, ...withoutSource } = awsEvent({ 'reviews-2': [awsRecord()] });
    const event = eventSource === null ? withoutSource : { ...withoutSource, eventSource };

    // Act
    const error = invalidEventFrom(event);

    // Assess
    expect(error.message).toContain('eventSource');
  });

  it.each([
    ['null', null],
    ['a string', '{"records":{}}'],
    ['no records', { eventSource: 'aws:kafka' }],
    ['records as an array', { eventSource: 'aws:kafka', records: [awsRecord()] }],
  ])('refuses %s as an event', (_label, event) => {
    // Act
    const action = () => parseKafkaEvent(event);

    // Assess
    expect(action).toThrow(InvalidEventError);
  });

  it('keeps the largest safe offset exactly', () => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord({ offset: Number.MAX_SAFE_INTEGER })] });

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.offset).toBe(9_007_199_254_740_991);
  });

  it.each([
    ['2^53, which a double cannot tell from 2^53 + 1', 2 ** 53],
    ['a fraction', 12.5],
    ['a negative offset', -1],
    ['a numeric string', '1234'],
    ['a missing offset', undefined],
  ])('refuses %s', (_label, offset) => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord({ offset })] });

    // Act
    const error = invalidEventFrom(event);

    // Assess
    expect(error.message).toContain('offset');
  });

  it('reads header bytes sent signed (as AWS does) and unsigned to the same bytes', () => {
    // Prepare: "é" is C3 A9 in UTF-8; AWS sends it as -61, -87
    const signed = awsRecord({ headers: [{ 'name-é': [-61, -87, 0, 127, -128, -1] }] });
    const unsigned = awsRecord({ offset: 1235, headers: [{ 'name-é': [195, 169, 0, 127, 128, 255] }] });
    const event = awsEvent({ 'reviews-2': [signed, unsigned] });

    // Act
    const [fromSigned, fromUnsigned] = parseKafkaEvent(event);

    // Assess
    const expected = Buffer.from([0xc3, 0xa9, 0x00, 0x7f, 0x80, 0xff]);
    expect(fromSigned?.headers).toEqual([{ name: 'name-é', value: expected }]);
    expect(fromUnsigned?.headers).toEqual([{ name: 'name-é', value: expected }]);
  });

  it.each([
    ['a byte out of range', [-129], '[-129]'],
    ['a byte above 255', [256], '[256]'],
    ['a fraction', [1.5], '[1.5]'],
    ['a string element', ['a'], '["a"]'],
    ['a string', 'plain', 'plain'],
    ['a number', 7, '7'],
  ])('keeps a header value holding %s as the bytes of its JSON text, never refusing the event', (_label, value, stored) => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord({ headers: [{ trace: value }] })] });

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.headers).toEqual([{ name: 'trace', value: Buffer.from(stored) }]);
  });

  it('stores a null header value, sent by AWS as {} (or null), as an empty value in its place', () => {
    // Prepare
    const event = awsEvent({
      'reviews-2': [awsRecord({ headers: [{ trace: [49] }, {}, { other: {} }, { gone: null }, null, { trace: [51] }] })],
    });

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.headers).toEqual([
      { name: 'trace', value: Buffer.from('1') },
      { name: '', value: Buffer.alloc(0) },
      { name: 'other', value: Buffer.alloc(0) },
      { name: 'gone', value: Buffer.alloc(0) },
      { name: '', value: Buffer.alloc(0) },
      { name: 'trace', value: Buffer.from('3') },
    ]);
  });

  it.each([
    ['absent', undefined, null],
    ['null', null, null],
    ["-1, Kafka's none", -1, null],
    ['another negative', -5, null],
    ['2^53, beyond exact', 2 ** 53, null],
    ['the largest int64, as JSON.parse reads it', JSON.parse('9223372036854775807') as number, null],
    ['a numeric string', '1796018400000', null],
    ['a fraction', 1.5, null],
    ['an object', { ms: 1 }, null],
    ['zero', 0, 0],
    ['the largest safe integer', Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  ])('reads a timestamp that is %s as %j, and keeps the record', (_label, timestamp, expected) => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord({ timestamp })] });

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.timestamp).toBe(expected);
    expect(record?.value).toEqual(Buffer.from('{"review_id":"gp:AOqpTOEx3k1s9QeV"}'));
  });

  it.each([['LOG_APPEND_TIME'], ['NO_TIMESTAMP_TYPE'], ['whatever'], [7], [null], [undefined]])(
    'accepts timestampType %j',
    (timestampType) => {
      // Act
      const [record] = parseKafkaEvent(awsEvent({ 'reviews-2': [awsRecord({ timestampType })] }));

      // Assess
      expect(record?.timestampType).toBe(typeof timestampType === 'string' ? timestampType : null);
    },
  );

  it('rules a record out (never the event) when its value is not a base64 string, keeping the JSON text as its payload', () => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord({ value: { not: 'base64' } }), awsRecord({ offset: 1235, key: 42 })] });

    // Act
    const [badValue, badKey] = parseKafkaEvent(event);

    // Assess
    expect(badValue?.value).toEqual(Buffer.from('{"not":"base64"}'));
    expect(badValue?.rejection).toEqual({
      reason: 'invalid_encoding',
      detail: 'the event carries the value as object, not a base64 string',
    });
    expect(badKey?.key).toEqual(Buffer.from('42'));
    expect(badKey?.rejection).toBeUndefined();
  });

  it('never throws for a well-formed event whatever the envelope fields hold, and returns every record in place', () => {
    const anything = fc.oneof(
      fc.constant(undefined),
      fc.jsonValue(),
      fc.base64String(),
      fc.array(fc.integer({ min: -300, max: 300 })),
      fc.constantFrom(-1, 2 ** 53, Number.MAX_SAFE_INTEGER, 1e300, 'CREATE_TIME', 'LOG_APPEND_TIME', {}),
    );
    const header = fc.oneof(
      fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.array(fc.integer({ min: -128, max: 255 })), anything), { maxKeys: 2 }),
      anything,
    );
    const envelope = fc.record(
      {
        timestamp: anything,
        timestampType: anything,
        key: anything,
        value: anything,
        headers: fc.oneof(anything, fc.array(header, { maxLength: 5 })),
      },
      { requiredKeys: [] },
    );

    fc.assert(
      fc.property(fc.array(envelope, { maxLength: 6 }), (envelopes) => {
        // Prepare: sent through JSON, as the Lambda runtime hands it over
        const records = envelopes.map((fields, index) => ({ ...fields, topic: 'reviews', partition: 2, offset: 100 + index }));
        const event = JSON.parse(JSON.stringify(awsEvent({ 'reviews-2': records }))) as unknown;

        // Act
        const parsed = parseKafkaEvent(event);

        // Assess
        expect(parsed.map((record) => record.offset)).toEqual(records.map((record) => record.offset));
        for (const record of parsed) {
          expect(record.timestamp === null || (Number.isSafeInteger(record.timestamp) && record.timestamp >= 0)).toBe(true);
          expect(record.value === null || Buffer.isBuffer(record.value)).toBe(true);
          for (const { name, value } of record.headers) expect(typeof name === 'string' && Buffer.isBuffer(value)).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps repeated header names and their order', () => {
    // Prepare
    const event = awsEvent({
      'reviews-2': [awsRecord({ headers: [{ hop: [49] }, { trace: [] }, { hop: [50] }] })],
    });

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.headers).toEqual([
      { name: 'hop', value: Buffer.from('1') },
      { name: 'trace', value: Buffer.alloc(0) },
      { name: 'hop', value: Buffer.from('2') },
    ]);
  });

  it('keeps headers whose names are also Object.prototype names', () => {
    // Prepare: as the Lambda runtime hands it over, i.e. parsed from JSON
    const event = JSON.parse(
      JSON.stringify(awsEvent({ 'reviews-2': [awsRecord({ headers: [] })] })).replace(
        '"headers":[]',
        '"headers":[{"__proto__":[120]},{"constructor":[121]},{"toString":[122]}]',
      ),
    ) as unknown;

    // Act
    const [record] = parseKafkaEvent(event);

    // Assess
    expect(record?.headers).toEqual([
      { name: '__proto__', value: Buffer.from('x') },
      { name: 'constructor', value: Buffer.from('y') },
      { name: 'toString', value: Buffer.from('z') },
    ]);
  });

  it('reads a null or missing key and value as null, and an empty value as zero bytes', () => {
    // Prepare
    const event = awsEvent({
      'reviews-2': [
        awsRecord({ offset: 1, key: null, value: null, headers: null }),
        awsRecord({ offset: 2, key: undefined, value: undefined, headers: undefined }),
        awsRecord({ offset: 3, value: '' }),
      ],
    });

    // Act
    const records = parseKafkaEvent(event);

    // Assess
    expect(records.map(({ key, value, headers }) => ({ key, value, headers }))).toEqual([
      { key: null, value: null, headers: [] },
      { key: null, value: null, headers: [] },
      {
        key: Buffer.from('gp:AOqpTOEx3k1s9QeV'),
        value: Buffer.alloc(0),
        headers: [{ name: 'content-type', value: Buffer.from('application/json') }],
      },
    ]);
  });

  it('refuses a record listed under another partition’s key', () => {
    // Prepare
    const event = awsEvent({ 'reviews-2': [awsRecord(), awsRecord({ partition: 1, offset: 77 })] });

    // Act
    const error = invalidEventFrom(event);

    // Assess
    expect(error.message).toContain('reviews-1@77');
    expect(error.message).toContain('"reviews-2"');
  });

  it('refuses a record listed under another topic’s key', () => {
    // Prepare
    const event = awsEvent({ 'app-stats-2': [awsRecord()] });

    // Act
    const action = () => parseKafkaEvent(event);

    // Assess
    expect(action).toThrow(InvalidEventError);
  });

  it('returns the records in event order, partition after partition', () => {
    // Prepare
    const event = awsEvent({
      'reviews-2': [awsRecord({ offset: 10 }), awsRecord({ offset: 11 })],
      'reviews-0': [awsRecord({ partition: 0, offset: 500 })],
    });

    // Act
    const records = parseKafkaEvent(event);

    // Assess
    expect(records.map((record) => `${partitionKey(record)}@${record.offset}`)).toEqual(['reviews-2@10', 'reviews-2@11', 'reviews-0@500']);
  });

  it('accepts an event without records', () => {
    // Act
    const records = parseKafkaEvent(awsEvent({}));

    // Assess
    expect(records).toEqual([]);
  });
});

describe('offsetRanges', () => {
  it('gives each partition its lowest and highest offset, in first-seen order', () => {
    // Prepare
    const records = parseKafkaEvent(
      awsEvent({
        'network-metrics-1': [
          awsRecord({ topic: 'network-metrics', partition: 1, offset: 9_007_199_254_740_990 }),
          awsRecord({ topic: 'network-metrics', partition: 1, offset: 9_007_199_254_740_991 }),
        ],
        'network-metrics-0': [
          awsRecord({ topic: 'network-metrics', partition: 0, offset: 41 }),
          awsRecord({ topic: 'network-metrics', partition: 0, offset: 40 }),
          awsRecord({ topic: 'network-metrics', partition: 0, offset: 45 }),
        ],
      }),
    );

    // Act
    const ranges = offsetRanges(records);

    // Assess
    expect([...ranges]).toEqual([
      ['network-metrics-1', { first: 9_007_199_254_740_990, last: 9_007_199_254_740_991 }],
      ['network-metrics-0', { first: 40, last: 45 }],
    ]);
  });

  it('is empty for no records', () => {
    // Act
    const ranges = offsetRanges([]);

    // Assess
    expect(ranges.size).toBe(0);
  });
});
