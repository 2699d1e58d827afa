import { describe, expect, it } from 'vitest';
import { COLUMN_RANGES, finiteNumber, histogram, InexactNumber, integer, price, protocols } from '../../../../shared/contracts/numbers.js';
import { schemaOutcome as outcome } from '../../../helpers/schemas.js';

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
