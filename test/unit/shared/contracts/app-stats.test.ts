import { describe, expect, it } from 'vitest';
import { decodeAppStats } from '../../../../shared/contracts/app-stats.js';
import { recordValue, sampleAppStats } from '../../../helpers/messages.js';

function decodeWith(changes: Record<string, unknown>): ReturnType<typeof decodeAppStats> {
  return decodeAppStats(recordValue({ ...sampleAppStats(), ...changes }));
}

function detailWith(changes: Record<string, unknown>): string {
  const result = decodeWith(changes);
  return result.ok ? 'ok' : `${result.rejection.reason}: ${result.rejection.detail}`;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const COUNTS = ['ratings_count', 'reviews_count', 'min_installs', 'real_installs'];
const OPTIONAL = [...COUNTS, 'score', 'histogram', 'price', 'currency', 'version', 'app_updated_at'];

describe('app-stats contract', () => {
  it('decodes the docs/design.md appendix message', () => {
    expect(decodeAppStats(recordValue(sampleAppStats()))).toEqual({
      ok: true,
      message: {
        package_name: 'com.example.weather',
        crawled_at: '2026-11-30T06:00:00.123456+00:00',
        score: 4.31,
        ratings_count: 182734,
        reviews_count: 40211,
        min_installs: 10000000,
        real_installs: 14532118,
        histogram: [9120, 3011, 7420, 30110, 133073],
        price: '0.00',
        currency: 'USD',
        version: '7.4.1',
        app_updated_at: '2026-11-21T14:03:00.000000+00:00',
      },
    });
  });

  it.each(['package_name', 'crawled_at'])('%s missing or null is "required"', (field) => {
    const message = sampleAppStats();
    delete message[field];
    const missing = decodeAppStats(recordValue(message));
    expect(missing.ok || missing.rejection).toEqual({ reason: 'invalid_message', detail: `${field}: required` });
    expect(detailWith({ [field]: null })).toBe(`invalid_message: ${field}: required`);
  });

  it('a message with only the required fields has every optional field null', () => {
    const result = decodeAppStats(recordValue({ package_name: 'com.example.weather', crawled_at: '2026-11-30T06:00:00Z' }));
    expect(result.ok).toBe(true);
    for (const field of OPTIONAL) expect(result.ok && result.message[field as keyof typeof result.message]).toBeNull();
    const nulled = decodeWith(Object.fromEntries(OPTIONAL.map((field) => [field, null])));
    for (const field of OPTIONAL) expect(nulled.ok && nulled.message[field as keyof typeof nulled.message]).toBeNull();
  });

  it('score: a finite number 0..5', () => {
    const rule = 'invalid_message: score: must be a number between 0 and 5';
    for (const good of [0, 5, 2.5]) expect(detailWith({ score: good })).toBe('ok');
    for (const bad of [-0.01, 5.01, '4.3', true]) expect(detailWith({ score: bad })).toBe(rule);
    const infinite = decodeAppStats(Buffer.from(JSON.stringify(sampleAppStats()).replace('"score":4.31', '"score":1e999')));
    expect(infinite.ok || infinite.rejection.detail).toBe('score: must be a number between 0 and 5');
  });

  it.each(COUNTS)('%s: integer 0..2^53-1 (BIGINT, exact)', (field) => {
    const rule = `invalid_message: ${field}: must be an integer between 0 and ${MAX_SAFE}`;
    expect(detailWith({ [field]: 0 })).toBe('ok');
    expect(detailWith({ [field]: MAX_SAFE })).toBe('ok');
    for (const bad of [-1, MAX_SAFE + 1, 1.5, '10', false]) expect(detailWith({ [field]: bad })).toBe(rule);
  });

  it('histogram: exactly 5 integers >= 0', () => {
    expect(detailWith({ histogram: [0, 0, 0, 0, 0] })).toBe('ok');
    expect(detailWith({ histogram: [1, 2, 3, 4] })).toBe('invalid_message: histogram: must be an array of exactly 5 integers >= 0');
    expect(detailWith({ histogram: [1, 2, 3, 4, 5, 6] })).toBe('invalid_message: histogram: must be an array of exactly 5 integers >= 0');
    expect(detailWith({ histogram: '1,2,3,4,5' })).toBe('invalid_message: histogram: must be an array of exactly 5 integers >= 0');
    expect(detailWith({ histogram: [1, -2, 3, 4, 5] })).toBe(`invalid_message: histogram[1]: must be an integer between 0 and ${MAX_SAFE}`);
    expect(detailWith({ histogram: [1, 2, 3, 4, null] })).toBe('invalid_message: histogram[4]: required');
  });

  it('price: 0..9999999999.99 with at most 2 decimals, as exact decimal text', () => {
    const rule = 'invalid_message: price: must be a number between 0 and 9999999999.99 with at most 2 decimal places';
    const priceOf = (price: unknown) => {
      const result = decodeWith({ price });
      return result.ok ? result.message.price : result.rejection.detail;
    };
    expect(priceOf(4.99)).toBe('4.99');
    expect(priceOf(9999999999.99)).toBe('9999999999.99');
    expect(priceOf(0.5)).toBe('0.50');
    for (const bad of [4.999, -1, 10_000_000_000, '4.99']) expect(detailWith({ price: bad })).toBe(rule);
  });

  it('currency: 3 upper-case letters', () => {
    expect(detailWith({ currency: 'EUR' })).toBe('ok');
    for (const bad of ['eur', 'EU', 'EURO', 978]) {
      expect(detailWith({ currency: bad })).toBe('invalid_message: currency: must be 3 upper-case letters A-Z');
    }
  });

  it('version (stored as app_version): at most 64 characters', () => {
    expect(detailWith({ version: 'v'.repeat(64) })).toBe('ok');
    expect(detailWith({ version: 'v'.repeat(65) })).toBe('invalid_message: version: must be a string of at most 64 characters');
  });

  it('crawled_at and app_updated_at follow the timestamp rules, offsets honoured', () => {
    const result = decodeWith({ crawled_at: '2027-01-01T02:30:00.000007+03:00', app_updated_at: '2026-11-21' });
    expect(result.ok || result.rejection.detail).toBe('app_updated_at: must be a timestamp YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM|-HH:MM]');
    const shifted = decodeWith({ crawled_at: '2027-01-01T02:30:00.000007+03:00' });
    expect(shifted.ok && shifted.message.crawled_at).toBe('2026-12-31T23:30:00.000007+00:00');
  });

  it('ignores unknown extra fields', () => {
    const result = decodeWith({ title: 'Weather', installs: '10,000,000+', genre: { id: 'WEATHER' } });
    expect(result.ok && Object.keys(result.message)).toEqual(Object.keys(sampleAppStats()));
  });

  it("rejects the scraper's legacy camelCase app object", () => {
    const legacy = {
      appId: 'com.example.weather',
      title: 'Weather',
      score: 4.31,
      ratings: 182734,
      reviews: 40211,
      minInstalls: 10000000,
      realInstalls: 14532118,
      histogram: [9120, 3011, 7420, 30110, 133073],
      price: 0,
      currency: 'USD',
      version: '7.4.1',
      updated: 1763733780000,
    };
    const result = decodeAppStats(recordValue(legacy));
    expect(result.ok || result.rejection).toEqual({
      reason: 'invalid_message',
      detail: 'package_name: required (+1 more)',
      violations: { total: 2, kept: ['package_name: required', 'crawled_at: required'] },
    });
  });
});
