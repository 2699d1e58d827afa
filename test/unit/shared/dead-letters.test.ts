import { sanitizeDetail } from '../../../shared/contracts/decode.js';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../../shared/dead-letters.js';
import {
  DEAD_LETTER_PAYLOAD_LIMIT,
  deadLetterRow,
  deadLetterTable,
  headersToJson,
  insertDeadLetters,
} from '../../../shared/dead-letters.js';
import type { KafkaRecord, Rejection } from '../../../shared/records.js';
import { FakeQueryable } from '../../helpers/fake-db.js';

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest();

function record(overrides: Partial<KafkaRecord> = {}): KafkaRecord {
  return {
    topic: 'reviews',
    partition: 2,
    offset: 1234,
    timestamp: 1_796_018_400_000,
    timestampType: 'CREATE_TIME',
    key: Buffer.from('gp:AOqpTOEx3k1s9QeV'),
    value: Buffer.from('{"review_id":'),
    headers: [],
    ...overrides,
  };
}

function letter(
  recordOverrides: Partial<KafkaRecord> = {},
  rejection: Rejection = { reason: 'invalid_json', detail: 'Unexpected end of JSON input' },
): DeadLetter {
  return { pipeline: 'reviews', record: record(recordOverrides), rejection };
}

describe('sanitizeDetail', () => {
  it.each([
    ['plain text', 'score: must be <= 5', 'score: must be <= 5'],
    ['a NUL', 'field "a\u0000b" is unknown', 'field "a\\u0000b" is unknown'],
    ['a lone high surrogate', 'content: "\ud800" is not storable', 'content: "\ufffd" is not storable'],
    ['a lone low surrogate at the end', 'bad \udc00', 'bad \ufffd'],
    ['an emoji (a valid pair)', 'user_name: 🌦 too long', 'user_name: 🌦 too long'],
  ])('%s', (_label, detail, expected) => {
    // Act
    const sanitized = sanitizeDetail(detail);

    // Assess
    expect(sanitized).toBe(expected);
    expect(sanitized).not.toContain('\u0000');
    expect(sanitized.isWellFormed()).toBe(true);
  });
});

describe('headersToJson', () => {
  it('keeps every header in order, values in base64', () => {
    // Prepare
    const headers = [
      { name: 'content-type', value: Buffer.from('application/json') },
      { name: 'trace', value: Buffer.from([0x00, 0xff, 0x80]) },
      { name: 'content-type', value: Buffer.alloc(0) },
    ];

    // Act
    const json = headersToJson(headers);

    // Assess
    expect(JSON.parse(json)).toEqual([
      { name: 'content-type', value: Buffer.from('application/json').toString('base64') },
      { name: 'trace', value: 'AP+A' },
      { name: 'content-type', value: '' },
    ]);
  });

  it('stores a name with a NUL under name_base64, exactly', () => {
    // Prepare
    const headers = [{ name: 'x-\u0000-id', value: Buffer.from('1') }];

    // Act
    const json = headersToJson(headers);

    // Assess
    const [stored] = JSON.parse(json) as Array<Record<string, string>>;
    expect(stored).toEqual({ name_base64: Buffer.from('x-\u0000-id').toString('base64'), value: 'MQ==' });
    expect(Buffer.from(stored?.name_base64 ?? '', 'base64').toString('utf8')).toBe('x-\u0000-id');
    expect(json).not.toContain('\\u0000'); // JSONB refuses \u0000
  });

  it('stores a name with a lone surrogate under name_base64', () => {
    // Prepare
    const headers = [
      { name: 'ok', value: Buffer.from('a') },
      { name: 'bad-\ud83c', value: Buffer.from('b') },
    ];

    // Act
    const json = headersToJson(headers);

    // Assess
    const stored = JSON.parse(json) as Array<Record<string, string>>;
    expect(stored[0]).toEqual({ name: 'ok', value: 'YQ==' });
    expect(stored[1]).not.toHaveProperty('name');
    expect(stored[1]).toHaveProperty('name_base64');
    expect(json.toLowerCase()).not.toContain('\\ud83c'); // JSONB refuses a lone surrogate escape
  });

  it('is an empty array for no headers', () => {
    // Act
    const json = headersToJson([]);

    // Assess
    expect(json).toBe('[]');
  });
});

describe('deadLetterRow', () => {
  it('stores a small payload whole, with its size and sha256', () => {
    // Prepare
    const value = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]); // not UTF-8: stored as raw bytes

    // Act
    const row = deadLetterRow(letter({ value }, { reason: 'invalid_encoding', detail: 'not UTF-8 at byte 1' }));

    // Assess
    expect(row.payload).toEqual(value);
    expect(row.payloadSize).toBe(4);
    expect(row.payloadSha256).toEqual(sha256(value));
    expect(row.reason).toBe('invalid_encoding');
    expect(row.detail).toBe('not UTF-8 at byte 1');
  });

  it('keeps a payload of exactly 64 KiB whole', () => {
    // Prepare
    const value = Buffer.alloc(DEAD_LETTER_PAYLOAD_LIMIT, 0x61);

    // Act
    const row = deadLetterRow(letter({ value }, { reason: 'invalid_message', detail: 'content: too long' }));

    // Assess
    expect(DEAD_LETTER_PAYLOAD_LIMIT).toBe(65_536);
    expect(row.payload?.length).toBe(65_536);
    expect(row.detail).toBe('content: too long');
  });

  it.each(['invalid_encoding', 'invalid_json', 'invalid_message', 'rejected_by_database'] as const)(
    'cuts a %s payload over 64 KiB, says so, and hashes the full value',
    (reason) => {
      // Prepare
      const value = Buffer.concat([Buffer.alloc(DEAD_LETTER_PAYLOAD_LIMIT, 0x61), Buffer.from('tail')]);

      // Act
      const row = deadLetterRow(letter({ value }, { reason, detail: 'the problem' }));

      // Assess
      expect(row.payload?.length).toBe(65_536);
      expect(row.payload?.equals(value.subarray(0, 65_536))).toBe(true);
      expect(row.payloadSize).toBe(65_540);
      expect(row.payloadSha256).toEqual(sha256(value));
      expect(row.detail).toBe('the problem [payload truncated to 65536 of 65540 bytes]');
    },
  );

  it('stores an unknown_application payload whole, however large (it is waiting to be re-driven)', () => {
    // Prepare
    const value = Buffer.alloc(200_000, 0x62);

    // Act
    const row = deadLetterRow(
      letter({ value }, { reason: 'unknown_application', detail: 'package_name "com.example.new" is not registered' }),
    );

    // Assess
    expect(row.payload?.equals(value)).toBe(true);
    expect(row.payloadSize).toBe(200_000);
    expect(row.detail).toBe('package_name "com.example.new" is not registered');
  });

  it('stores a null value as no payload, size 0 and the sha256 of zero bytes', () => {
    // Act
    const row = deadLetterRow(letter({ value: null }, { reason: 'empty_message', detail: 'the value is null' }));

    // Assess
    expect(row.payload).toBeNull();
    expect(row.payloadSize).toBe(0);
    expect(row.payloadSha256.toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('never stores a NUL in detail', () => {
    // Act
    const row = deadLetterRow(letter({}, { reason: 'invalid_message', detail: 'key "\u0000" is not allowed' }));

    // Assess
    expect(row.detail).toBe('key "\\u0000" is not allowed');
  });
});

describe('insertDeadLetters', () => {
  it('writes nothing for no letters', async () => {
    // Prepare
    const database = new FakeQueryable();

    // Act
    const inserted = await insertDeadLetters(database, []);

    // Assess
    expect(inserted).toBe(0);
    expect(database.queries).toEqual([]);
  });

  it('writes all letters with one statement that skips a replayed identity, and counts the new ones', async () => {
    // Prepare: the second letter is already stored (a replay), so RETURNING yields one row
    const database = new FakeQueryable(() => [{ inserted: true }]);
    const letters = [
      letter({ offset: 10, headers: [{ name: 'trace', value: Buffer.from('t1') }] }),
      letter({ partition: 0, offset: 11, key: null, value: null, timestamp: -1 }, { reason: 'empty_message', detail: 'null value' }),
    ];

    // Act
    const inserted = await insertDeadLetters(database, letters);

    // Assess
    expect(inserted).toBe(1);
    expect(database.queries).toHaveLength(1);
    const [query] = database.queries;
    expect(query?.text).toMatch(/^WITH written AS \(INSERT INTO dead_letter_events \(/);
    expect(query?.text).toContain('ON CONFLICT (topic, partition, kafka_offset, payload_sha256) DO NOTHING');
    const column = (name: string) => query?.values?.[deadLetterTable.columns.findIndex((c) => c.name === name)];
    expect(column('pipeline')).toEqual(['reviews', 'reviews']);
    expect(column('topic')).toEqual(['reviews', 'reviews']);
    // Scalar columns as PostgreSQL reads the array parameter (element text); bytea ones as the driver sends them.
    expect(column('partition')).toEqual(['2', '0']);
    expect(column('kafka_offset')).toEqual(['10', '11']);
    expect(column('kafka_timestamp')).toEqual(['1796018400000', null]); // Kafka's -1: no timestamp
    expect(column('message_key')).toEqual([Buffer.from('gp:AOqpTOEx3k1s9QeV'), null]);
    expect(column('payload')).toEqual([Buffer.from('{"review_id":'), null]);
    expect(column('payload_size')).toEqual(['13', '0']);
    expect(column('payload_sha256')).toEqual([sha256(Buffer.from('{"review_id":')), sha256(Buffer.alloc(0))]);
    expect(column('headers')).toEqual([JSON.stringify([{ name: 'trace', value: 'dDE=' }]), '[]']);
    expect(column('reason')).toEqual(['invalid_json', 'empty_message']);
    expect(column('detail')).toEqual(['Unexpected end of JSON input', 'null value']);
  });
});
