import type { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { optional } from '../../../../shared/contracts/fields.js';
import { COLUMN_RANGES, finiteNumber, histogram, InexactNumber, integer, price, protocols } from '../../../../shared/contracts/numbers.js';
import { codePointsAtMost, currency, packageName, text, uuid } from '../../../../shared/contracts/text.js';

/** `ok <output as JSON>` or `<path>: <message>` of the first issue. */
function outcome(schema: z.ZodType, input: unknown): string {
  const result = schema.safeParse(input);
  if (result.success) return `ok ${JSON.stringify(result.data)}`;
  const issue = result.error.issues[0];
  return `${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`;
}

const EMOJI = '\u{1F326}'; // 1 code point, 2 UTF-16 units
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

describe('integers per column', () => {
  it.each([
    ['smallint', COLUMN_RANGES.smallint.min, COLUMN_RANGES.smallint.max],
    ['integer', COLUMN_RANGES.integer.min, COLUMN_RANGES.integer.max],
    ['bigint', -MAX_SAFE, MAX_SAFE],
  ] as const)('%s: accepts its bounds, rejects one beyond', (column, min, max) => {
    const schema = integer(column);
    const rule = `: must be an integer between ${min} and ${max}`;
    expect(outcome(schema, min)).toBe(`ok ${min}`);
    expect(outcome(schema, max)).toBe(`ok ${max}`);
    expect(outcome(schema, min - 1)).toBe(rule);
    expect(outcome(schema, max + 1)).toBe(rule);
  });

  it('narrows to the contract range (score 1..5, counts >= 0)', () => {
    const score = integer('smallint', { min: 1, max: 5 });
    expect(outcome(score, 1)).toBe('ok 1');
    expect(outcome(score, 5)).toBe('ok 5');
    expect(outcome(score, 0)).toBe(': must be an integer between 1 and 5');
    expect(outcome(score, 6)).toBe(': must be an integer between 1 and 5');
    const count = integer('integer', { min: 0 });
    expect(outcome(count, 0)).toBe('ok 0');
    expect(outcome(count, -1)).toBe(': must be an integer between 0 and 2147483647');
    expect(outcome(count, 2147483647)).toBe('ok 2147483647');
    expect(outcome(count, 2147483648)).toBe(': must be an integer between 0 and 2147483647');
  });

  it('a whole number is the integer it denotes; fractions, booleans, strings, 2^53 are not integers', () => {
    const schema = integer('bigint', { min: 0 });
    const rule = `: must be an integer between 0 and ${MAX_SAFE}`;
    expect(outcome(schema, JSON.parse('17.0'))).toBe('ok 17');
    expect(outcome(schema, JSON.parse('1e2'))).toBe('ok 100');
    expect(outcome(schema, 17.5)).toBe(rule);
    expect(outcome(schema, true)).toBe(rule);
    expect(outcome(schema, '17')).toBe(rule);
    expect(outcome(schema, [17])).toBe(rule);
    expect(outcome(schema, 2 ** 53)).toBe(rule);
    expect(outcome(schema, 2 ** 53 + 2)).toBe(rule);
    expect(outcome(schema, Number.POSITIVE_INFINITY)).toBe(rule);
    expect(outcome(schema, Number.NaN)).toBe(rule);
    expect(outcome(schema, new InexactNumber(17, '17.0000000000000001'))).toBe(rule);
    expect(outcome(schema, undefined)).toBe(': required');
    expect(outcome(schema, null)).toBe(': required');
  });
});

describe('negative zero', () => {
  it('is written as 0 by every number block', () => {
    expect(Object.is(integer('integer').parse(-0), 0)).toBe(true);
    expect(Object.is(finiteNumber({ min: 0 }).parse(-0), 0)).toBe(true);
    expect(Object.is(histogram.parse([-0, 0, 0, 0, 0])[0], 0)).toBe(true);
    expect(Object.is(protocols.parse({ tls: -0 }).tls, 0)).toBe(true);
    expect(price.parse(-0)).toBe('0.00');
  });
});

describe('finite numbers', () => {
  it('accepts the bounds and rejects beyond, non-numbers and non-finite values', () => {
    const score = finiteNumber({ min: 0, max: 5 });
    expect(outcome(score, 0)).toBe('ok 0');
    expect(outcome(score, 5)).toBe('ok 5');
    expect(outcome(score, 4.31)).toBe('ok 4.31');
    expect(outcome(score, 5.000001)).toBe(': must be a number between 0 and 5');
    expect(outcome(score, -0.000001)).toBe(': must be a number between 0 and 5');
    expect(outcome(score, '4.3')).toBe(': must be a number between 0 and 5');
    expect(outcome(score, false)).toBe(': must be a number between 0 and 5');
    const rtt = finiteNumber({ min: 0 });
    expect(outcome(rtt, 1e300)).toBe('ok 1e+300');
    expect(outcome(rtt, Number.POSITIVE_INFINITY)).toBe(': must be a number >= 0');
    expect(outcome(rtt, Number.NaN)).toBe(': must be a number >= 0');
  });

  it('takes the parsed value of a number whose text had more digits than a double holds', () => {
    expect(outcome(finiteNumber({ min: 0 }), new InexactNumber(0.1, '0.1000000000000000000001'))).toBe('ok 0.1');
  });
});

describe('strings', () => {
  it('counts code points, not UTF-16 units', () => {
    const version = text({ max: 64 });
    expect(outcome(version, EMOJI.repeat(64))).toBe(`ok "${EMOJI.repeat(64)}"`);
    expect(outcome(version, EMOJI.repeat(65))).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, 'é'.repeat(64))).toBe(`ok "${'é'.repeat(64)}"`);
    expect(outcome(version, 'x'.repeat(65))).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, `${'x'.repeat(63)}${EMOJI}`)).toBe(`ok "${'x'.repeat(63)}${EMOJI}"`);
    expect(outcome(version, `${'x'.repeat(64)}${EMOJI}`)).toBe(': must be a string of at most 64 characters');
    expect(outcome(version, '')).toBe('ok ""');
  });

  it('codePointsAtMost is exact around the bound', () => {
    expect(codePointsAtMost('', 0)).toBe(true);
    expect(codePointsAtMost('a', 0)).toBe(false);
    expect(codePointsAtMost(EMOJI, 1)).toBe(true);
    expect(codePointsAtMost(`${EMOJI}a`, 1)).toBe(false);
    expect(codePointsAtMost(`a${EMOJI}${EMOJI}`, 3)).toBe(true);
    expect(codePointsAtMost(`a${EMOJI}${EMOJI}`, 2)).toBe(false);
    expect(codePointsAtMost(EMOJI.repeat(255), 255)).toBe(true);
    expect(codePointsAtMost(EMOJI.repeat(256), 255)).toBe(false);
  });

  it('1..255 for review_id-like fields', () => {
    const id = text({ min: 1, max: 255 });
    expect(outcome(id, '')).toBe(': must be a string of 1 to 255 characters');
    expect(outcome(id, EMOJI.repeat(255)).startsWith('ok')).toBe(true);
    expect(outcome(id, EMOJI.repeat(256))).toBe(': must be a string of 1 to 255 characters');
  });

  it('rejects NUL and lone surrogates, also in TEXT fields without a limit', () => {
    for (const schema of [text(), text({ max: 64 }), packageName]) {
      expect(outcome(schema, 'a\u0000b')).toBe(': must not contain a NUL character');
      expect(outcome(schema, 'a\ud800b')).toBe(': must not contain a lone surrogate');
      expect(outcome(schema, 'a\udc00')).toBe(': must not contain a lone surrogate');
      expect(outcome(schema, '\ud83c')).toBe(': must not contain a lone surrogate');
    }
    expect(outcome(text(), 'x'.repeat(100_000)).startsWith('ok')).toBe(true);
    expect(outcome(text(), 17)).toBe(': must be a string');
  });

  it('package_name: 1..255 characters, no whitespace of any kind', () => {
    const rule = ': must be a string of 1 to 255 characters without whitespace';
    expect(outcome(packageName, 'com.example.weather')).toBe('ok "com.example.weather"');
    expect(outcome(packageName, 'a'.repeat(255))).toBe(`ok "${'a'.repeat(255)}"`);
    expect(outcome(packageName, 'a'.repeat(256))).toBe(rule);
    expect(outcome(packageName, EMOJI.repeat(255)).startsWith('ok')).toBe(true);
    expect(outcome(packageName, '')).toBe(rule);
    for (const space of [' ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff']) {
      expect(outcome(packageName, `com.example${space}weather`)).toBe(rule);
    }
    expect(outcome(packageName, undefined)).toBe(': required');
  });
});

describe('uuid', () => {
  it('accepts any version in 8-4-4-4-12 form and writes it in lower case', () => {
    expect(outcome(uuid, '9B2F6A0E-3C4D-4E5F-8A9B-0C1D2E3F4A5B')).toBe('ok "9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"');
    expect(outcome(uuid, '00000000-0000-0000-0000-000000000000')).toBe('ok "00000000-0000-0000-0000-000000000000"');
    expect(outcome(uuid, '01890a5d-ac96-774b-bcce-b302099a8057')).toBe('ok "01890a5d-ac96-774b-bcce-b302099a8057"');
  });

  it.each([
    '9b2f6a0e3c4d4e5f8a9b0c1d2e3f4a5b',
    '{9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b}',
    '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5',
    '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b0',
    '9b2f6a0g-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
    ' 9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
    '',
  ])('rejects %j', (input) => {
    expect(outcome(uuid, input)).toBe(': must be a UUID (8-4-4-4-12 hexadecimal digits)');
  });
});

describe('price', () => {
  const rule = ': must be a number between 0 and 9999999999.99 with at most 2 decimal places';

  it('accepts 0..9999999999.99 with at most 2 decimals and writes exact decimal text', () => {
    expect(outcome(price, 0)).toBe('ok "0.00"');
    expect(outcome(price, 4.99)).toBe('ok "4.99"');
    expect(outcome(price, 0.1)).toBe('ok "0.10"');
    expect(outcome(price, 0.29)).toBe('ok "0.29"');
    expect(outcome(price, 1.005 + 0.005)).toBe(rule); // 1.0099999999999998
    expect(outcome(price, 9999999999.99)).toBe('ok "9999999999.99"');
    expect(outcome(price, 1234567.89)).toBe('ok "1234567.89"');
  });

  it('rejects more decimals, out of range, and non-numbers', () => {
    expect(outcome(price, 4.999)).toBe(rule);
    expect(outcome(price, 0.001)).toBe(rule);
    expect(outcome(price, -0.01)).toBe(rule);
    expect(outcome(price, 10_000_000_000)).toBe(rule);
    expect(outcome(price, 9999999999.991)).toBe(rule);
    expect(outcome(price, '4.99')).toBe(rule);
    expect(outcome(price, new InexactNumber(4.99, '4.990000000000000001'))).toBe(rule);
  });
});

describe('currency', () => {
  it('exactly 3 upper-case ASCII letters', () => {
    const rule = ': must be 3 upper-case letters A-Z';
    expect(outcome(currency, 'USD')).toBe('ok "USD"');
    for (const bad of ['usd', 'US', 'USDT', 'ÜSD', 'U$D', 'US ', '']) expect(outcome(currency, bad)).toBe(rule);
  });
});

describe('histogram', () => {
  const rule = ': must be an array of exactly 5 integers >= 0';

  it('exactly 5 integers >= 0 within BIGINT', () => {
    expect(outcome(histogram, [0, 1, 2, 3, MAX_SAFE])).toBe(`ok [0,1,2,3,${MAX_SAFE}]`);
    expect(outcome(histogram, [1, 2, 3, 4])).toBe(rule);
    expect(outcome(histogram, [1, 2, 3, 4, 5, 6])).toBe(rule);
    expect(outcome(histogram, [])).toBe(rule);
    expect(outcome(histogram, { 0: 1 })).toBe(rule);
    expect(outcome(histogram, [1, 2, -3, 4, 5])).toBe(`2: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(histogram, [1, 2, 3, 4, 2 ** 53])).toBe(`4: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(histogram, [1, 2, 3, 4, 0.5])).toBe(`4: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(histogram, [1, 2, 3, 4, '5'])).toBe(`4: must be an integer between 0 and ${MAX_SAFE}`);
  });
});

describe('protocols', () => {
  const nameRule = 'protocol name must be 1 to 64 characters';

  it('name 1..64 characters -> integer >= 0; every name kept', () => {
    expect(outcome(protocols, { tls: 7010, dns: 0 })).toBe('ok {"tls":7010,"dns":0}');
    expect(outcome(protocols, {})).toBe('ok {}');
    expect(outcome(protocols, { [EMOJI.repeat(64)]: 1 })).toBe(`ok {"${EMOJI.repeat(64)}":1}`);
    expect(outcome(protocols, JSON.parse('{"__proto__": 5}'))).toBe('ok {"__proto__":5}');
  });

  it('rejects bad names, bad counts, and anything but an object', () => {
    expect(outcome(protocols, { '': 1 })).toBe(`: ${nameRule}`);
    expect(outcome(protocols, { [EMOJI.repeat(65)]: 1 })).toBe(`${EMOJI.repeat(65)}: ${nameRule}`);
    expect(outcome(protocols, { 'a\u0000': 1 })).toBe(`a\u0000: ${nameRule}`);
    expect(outcome(protocols, { tls: -1 })).toBe(`tls: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(protocols, { tls: 1.5 })).toBe(`tls: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(protocols, { tls: '1' })).toBe(`tls: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(protocols, { tls: 2 ** 53 })).toBe(`tls: must be an integer between 0 and ${MAX_SAFE}`);
    expect(outcome(protocols, [1, 2])).toBe(': must be an object of protocol name -> integer >= 0');
    expect(outcome(protocols, 'tls')).toBe(': must be an object of protocol name -> integer >= 0');
  });
});

describe('optional', () => {
  it('absent and null come out as null; a present value is still checked', () => {
    const schema = optional(integer('integer', { min: 0 }));
    expect(outcome(schema, undefined)).toBe('ok null');
    expect(outcome(schema, null)).toBe('ok null');
    expect(outcome(schema, 3)).toBe('ok 3');
    expect(outcome(schema, -3)).toBe(': must be an integer between 0 and 2147483647');
  });
});
