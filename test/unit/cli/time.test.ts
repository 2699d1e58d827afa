import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/command.js';
import { instantText, parseDuration, parseInstant, parseSince } from '../../../cli/time.js';
describe('durations, instants', () => {
  it('reads 30d, 12h, 90m, 45s, 2w', () => {
    expect(parseDuration('30d', '--older-than')).toBe(30 * 86_400_000);
    expect(parseDuration('12h', '--older-than')).toBe(12 * 3_600_000);
    expect(parseDuration('90m', '--older-than')).toBe(90 * 60_000);
    expect(parseDuration('45s', '--older-than')).toBe(45_000);
    expect(parseDuration('2w', '--older-than')).toBe(14 * 86_400_000);
  });

  it('refuses anything else, naming the option', () => {
    for (const text of ['30', 'd', '30 days', '-1d', '1.5h', '']) {
      expect(() => parseDuration(text, '--older-than')).toThrow(UsageError);
    }
    expect(() => parseDuration('soon', '--older-than')).toThrow(/--older-than must be a duration/);
  });

  it('reads ISO instants; no offset means UTC', () => {
    expect(parseInstant('2026-11-30', '--to').toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(parseInstant('2026-11-30T06:00', '--to').toISOString()).toBe('2026-11-30T06:00:00.000Z');
    expect(parseInstant('2026-11-30T06:00:00.123Z', '--to').toISOString()).toBe('2026-11-30T06:00:00.123Z');
    expect(parseInstant('2026-11-30T09:30:00+03:30', '--to').toISOString()).toBe('2026-11-30T06:00:00.000Z');
  });

  it('refuses impossible or ambiguous instants', () => {
    for (const text of ['2026-02-30', '2026-11-30 06:00', '30/11/2026', '2026-11-30T25:00', 'yesterday', '2026-11-30T06:00+0330']) {
      expect(() => parseInstant(text, '--to'), text).toThrow(UsageError);
    }
  });

  it('--since takes an instant or a duration ago', () => {
    const now = Date.parse('2026-11-30T12:00:00Z');
    expect(parseSince('24h', '--since', now).toISOString()).toBe('2026-11-29T12:00:00.000Z');
    expect(parseSince('2026-11-01', '--since', now).toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });
});

describe('instantText', () => {
  it('shows an instant as ISO 8601, nothing as -, and one beyond JavaScript dates without throwing', () => {
    // Prepare: how node-postgres hands over a timestamptz of 2^53 - 1 ms (year 287396)
    const beyond = new Date('+287396-10-12T08:59:00.991Z');

    // Act / Assess
    expect(Number.isNaN(beyond.getTime())).toBe(true);
    expect(instantText(new Date('2026-11-30T06:00:00.123Z'))).toBe('2026-11-30T06:00:00.123Z');
    expect(instantText(null)).toBe('-');
    expect(instantText(beyond)).toBe('after the year 275760 (beyond JavaScript dates)');
  });
});
