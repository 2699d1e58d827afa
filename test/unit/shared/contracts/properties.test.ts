import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeAppStats } from '../../../../shared/contracts/app-stats.js';
import { MAX_DETAIL_LENGTH } from '../../../../shared/contracts/decode.js';
import { decodeNetworkMetrics } from '../../../../shared/contracts/network-metrics.js';
import { decodeReview } from '../../../../shared/contracts/reviews.js';
import type { DecodeResult } from '../../../../shared/contracts/decoder.js';
import { REJECTION_REASONS } from '../../../../shared/records.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../../../helpers/messages.js';

// An independent statement of the contracts (docs/design.md section 5), to check every accepted message by.
type Rule =
  | { readonly kind: 'integer'; readonly min: number; readonly max: number; readonly required: boolean }
  | { readonly kind: 'number'; readonly min: number; readonly max: number }
  | { readonly kind: 'text'; readonly min: number; readonly max: number; readonly required: boolean }
  | { readonly kind: 'package' | 'timestamp' | 'uuid' }
  | { readonly kind: 'optional timestamp' | 'price' | 'currency' | 'histogram' | 'protocols' };

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const INT = 2_147_483_647;
const int = (min: number, max: number, required = false): Rule => ({ kind: 'integer', min, max, required });
const str = (min: number, max: number, required = false): Rule => ({ kind: 'text', min, max, required });

const CONTRACTS = {
  'app-stats': {
    decode: decodeAppStats as (value: Buffer | null) => DecodeResult<object>,
    sample: sampleAppStats,
    rules: {
      package_name: { kind: 'package' },
      crawled_at: { kind: 'timestamp' },
      score: { kind: 'number', min: 0, max: 5 },
      ratings_count: int(0, MAX_SAFE),
      reviews_count: int(0, MAX_SAFE),
      min_installs: int(0, MAX_SAFE),
      real_installs: int(0, MAX_SAFE),
      histogram: { kind: 'histogram' },
      price: { kind: 'price' },
      currency: { kind: 'currency' },
      version: str(0, 64),
      app_updated_at: { kind: 'optional timestamp' },
    },
  },
  reviews: {
    decode: decodeReview as (value: Buffer | null) => DecodeResult<object>,
    sample: sampleReview,
    rules: {
      review_id: str(1, 255, true),
      package_name: { kind: 'package' },
      user_name: str(0, 255),
      content: str(0, Number.POSITIVE_INFINITY),
      score: int(1, 5, true),
      thumbs_up_count: int(0, INT, true),
      review_created_version: str(0, 64),
      app_version: str(0, 64),
      reviewed_at: { kind: 'timestamp' },
      reply_content: str(0, Number.POSITIVE_INFINITY),
      replied_at: { kind: 'optional timestamp' },
      last_synced_at: { kind: 'timestamp' },
    },
  },
  'network-metrics': {
    decode: decodeNetworkMetrics as (value: Buffer | null) => DecodeResult<object>,
    sample: sampleNetworkMetrics,
    rules: {
      analysis_id: { kind: 'uuid' },
      package_name: { kind: 'package' },
      captured_at: { kind: 'timestamp' },
      duration_ms: int(0, INT, true),
      packet_count: int(0, MAX_SAFE, true),
      bytes_sent: int(0, MAX_SAFE, true),
      bytes_received: int(0, MAX_SAFE, true),
      tcp_connections: int(0, INT),
      dns_queries: int(0, INT),
      unique_hosts: int(0, INT),
      avg_rtt_ms: { kind: 'number', min: 0, max: Number.POSITIVE_INFINITY },
      retransmission_rate: { kind: 'number', min: 0, max: 1 },
      protocols: { kind: 'protocols' },
      analyzer_version: str(0, 64),
    },
  },
} satisfies Record<string, { readonly decode: unknown; readonly sample: unknown; readonly rules: Record<string, Rule> }>;

const UTC_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/;

function isStorable(value: string): boolean {
  return !value.includes('\0') && value.isWellFormed();
}

function codePoints(value: string): number {
  return [...value].length;
}

function isSafeInt(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

/** Whether `value` satisfies `rule` as an OUTPUT value (normalised, optional = null). */
function satisfies(rule: Rule, value: unknown): boolean {
  const required = 'required' in rule ? rule.required : ['package', 'timestamp', 'uuid'].includes(rule.kind);
  if (value === null) return !required;
  switch (rule.kind) {
    case 'integer':
      return isSafeInt(value, rule.min, rule.max);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) && value >= rule.min && value <= rule.max;
    case 'text':
      return typeof value === 'string' && isStorable(value) && codePoints(value) >= rule.min && codePoints(value) <= rule.max;
    case 'package':
      return typeof value === 'string' && isStorable(value) && /^\S{1,255}$/u.test(value);
    case 'timestamp':
    case 'optional timestamp':
      return typeof value === 'string' && UTC_TIMESTAMP.test(value) && !Number.isNaN(Date.parse(value));
    case 'uuid':
      return typeof value === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(value);
    case 'price':
      return typeof value === 'string' && /^\d{1,10}\.\d{2}$/.test(value);
    case 'currency':
      return typeof value === 'string' && /^[A-Z]{3}$/.test(value);
    case 'histogram':
      return Array.isArray(value) && value.length === 5 && value.every((n) => isSafeInt(n, 0, MAX_SAFE));
    case 'protocols':
      return (
        typeof value === 'object' &&
        !Array.isArray(value) &&
        Object.entries(value).every(
          ([name, count]) => isStorable(name) && codePoints(name) >= 1 && codePoints(name) <= 64 && isSafeInt(count, 0, MAX_SAFE),
        )
      );
  }
}

function checkResult(topic: keyof typeof CONTRACTS, result: DecodeResult<object>): void {
  if (!result.ok) {
    expect(REJECTION_REASONS).toContain(result.rejection.reason);
    expect(typeof result.rejection.detail).toBe('string');
    expect(result.rejection.detail.includes('\0')).toBe(false);
    expect(result.rejection.detail.isWellFormed()).toBe(true);
    expect(result.rejection.detail.length).toBeLessThanOrEqual(MAX_DETAIL_LENGTH);
    return;
  }
  const { rules, decode } = CONTRACTS[topic];
  const message = result.message as Record<string, unknown>;
  expect(Object.keys(message).sort()).toEqual(Object.keys(rules).sort());
  for (const [field, rule] of Object.entries(rules)) {
    if (!satisfies(rule as Rule, message[field])) throw new Error(`${field} = ${JSON.stringify(message[field])} breaks the contract`);
  }
  // What the decoder wrote is itself a message of the contract and decodes to itself.
  const again = decode(Buffer.from(JSON.stringify({ ...message, price: toPriceInput(message.price) })));
  expect(again).toEqual(result);
}

function toPriceInput(price: unknown): unknown {
  return typeof price === 'string' ? Number(price) : price;
}

const TOPICS = Object.keys(CONTRACTS) as Array<keyof typeof CONTRACTS>;

// ---- arbitraries -------------------------------------------------------------------------------

/** Code units a producer may send: ASCII, multi-byte text, emoji, NUL, lone surrogates. */
const unit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom('é', 'ß', '中', '\u{1F326}', '\u{1F469}\u200d\u{1F4BB}', ' ', '\t', '\u00a0') },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', '\ud800', '\udfff', '\ud83c', '\udf26') },
);
const anyString = fc.oneof(
  fc.string({ unit, maxLength: 20 }),
  fc.string({ unit, minLength: 60, maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
);

/** Raw JSON number texts that JSON.parse would round or overflow. */
const rawNumber = fc
  .constantFrom(
    '1e999',
    '-1e999',
    '9007199254740992',
    '9007199254740993',
    '18446744073709551616',
    '17.0000000000000001',
    '4.990000000000000001',
    '1e-400',
    '-0',
    '0.0',
    '1E2',
    '2147483648',
    '2147483647.0',
    '5.0000000000000001',
  )
  .map((raw) => ({ raw }));

const timestampLike = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 0, max: 10_000 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      fc.integer({ min: 0, max: 25 }),
      fc.integer({ min: 0, max: 61 }),
      fc.integer({ min: 0, max: 61 }),
      fc.constantFrom('', '.5', '.123456', '.1234567', '.000001'),
      fc.constantFrom('', 'Z', '+00:00', '-00:00', '+03:30', '-12:00', '+23:59', '+24:00', '+0330', ' Z'),
    )
    .map(([y, mo, d, h, mi, s, fraction, offset]) => {
      const p = (n: number, w: number) => String(n).padStart(w, '0');
      return `${p(y, 4)}-${p(mo, 2)}-${p(d, 2)}T${p(h, 2)}:${p(mi, 2)}:${p(s, 2)}${fraction}${offset}`;
    }),
  fc.constantFrom('2026-11-30', '2026-11-30 06:00:00', '0001-01-01T00:00:00+00:01', '9999-12-31T23:59:59-00:01'),
);

const boundaryInteger = fc.constantFrom(
  -1,
  0,
  1,
  5,
  6,
  32767,
  32768,
  INT,
  INT + 1,
  MAX_SAFE,
  MAX_SAFE + 1,
  -MAX_SAFE,
  0.5,
  17.25,
  9999999999.99,
  9999999999.991,
  4.99,
  4.999,
  1e-7,
);

/** A replacement for one field: anything a broken or hostile producer could send. */
const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  boundaryInteger,
  fc.integer(),
  fc.double(),
  rawNumber,
  anyString,
  timestampLike,
  fc.uuid().map((id) => id.toUpperCase()),
  fc.constantFrom('USD', 'usd', 'EU', 'com.example.weather', 'com example'),
  fc.array(fc.oneof(boundaryInteger, fc.nat(), rawNumber), { maxLength: 7 }),
  fc.dictionary(anyString, fc.oneof(fc.nat(), boundaryInteger, rawNumber, anyString), { maxKeys: 4 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** JSON text of an object whose values may be `{ raw }` number texts; `undefined` drops the field. */
function toJsonText(entries: ReadonlyArray<readonly [string, unknown]>): string {
  const parts: string[] = [];
  for (const [key, value] of entries) {
    if (value === undefined) continue;
    parts.push(`${JSON.stringify(key)}:${encodeValue(value)}`);
  }
  return `{${parts.join(',')}}`;
}

function encodeValue(value: unknown): string {
  if (typeof value === 'object' && value !== null && 'raw' in value && typeof value.raw === 'string') return value.raw;
  if (Array.isArray(value)) return `[${value.map(encodeValue).join(',')}]`;
  if (typeof value === 'object' && value !== null) return toJsonText(Object.entries(value));
  return JSON.stringify(value) ?? 'null';
}

/** A valid sample with some fields replaced, some extra fields added (also with odd keys). */
function mutated(topic: keyof typeof CONTRACTS): fc.Arbitrary<string> {
  const fields = Object.keys(CONTRACTS[topic].rules);
  return fc
    .tuple(fc.dictionary(fc.constantFrom(...fields), fieldValue, { maxKeys: 3 }), fc.dictionary(anyString, fieldValue, { maxKeys: 2 }))
    .map(([changes, extras]) => {
      const message: Record<string, unknown> = CONTRACTS[topic].sample();
      const entries = [...Object.entries(message).map(([k, v]) => [k, k in changes ? changes[k] : v] as const)];
      for (const [key, value] of Object.entries(extras)) if (!(key in message)) entries.push([key, value]);
      return toJsonText(entries);
    });
}

const RUNS = { numRuns: 400 };

// A fixed number of runs, CPU-bound: seconds on a quiet machine, several times that on a busy
// one. The timeout bounds a hang, not the speed (vitest's 5 s default failed fresh runs under load).
describe.each(TOPICS)('%s decoder, for any input', { timeout: 60_000 }, (topic) => {
  const { decode } = CONTRACTS[topic];

  it('arbitrary bytes: never throws, accepts only contract messages', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        checkResult(topic, decode(Buffer.from(bytes)));
      }),
      RUNS,
    );
  });

  it('arbitrary JSON values and objects: never throws, accepts only contract messages', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), fc.object(), fc.json()), (value) => {
        const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');
        checkResult(topic, decode(Buffer.from(text, 'utf8')));
      }),
      RUNS,
    );
  });

  it('valid messages with random field mutations: never throws, accepts only contract messages', () => {
    let accepted = 0;
    fc.assert(
      fc.property(mutated(topic), (text) => {
        const result = decode(Buffer.from(text, 'utf8'));
        checkResult(topic, result);
        if (result.ok) accepted++;
      }),
      { numRuns: 1500 },
    );
    // Both branches were exercised, not only rejections.
    expect(accepted).toBeGreaterThan(50);
    expect(accepted).toBeLessThan(1450);
  });

  it('valid messages with random bytes flipped: never throws', () => {
    const valid = Buffer.from(JSON.stringify(CONTRACTS[topic].sample()), 'utf8');
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat({ max: valid.length - 1 }), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }), (flips) => {
        const bytes = Buffer.from(valid);
        for (const [at, byte] of flips) bytes[at] = byte;
        checkResult(topic, decode(bytes));
      }),
      RUNS,
    );
  });
});
