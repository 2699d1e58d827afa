import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { civilFromDays, daysFromCivil, parseTimestamp, timestamp } from '../../../../shared/contracts/timestamps.js';

const FORMAT = 'must be a timestamp YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM|-HH:MM]';
const CALENDAR = 'must be a real calendar date and time';
const RANGE = 'must fall within the years 0001 to 9999 in UTC';

function ruleOf(text: string): string {
  const parsed = parseTimestamp(text);
  return typeof parsed === 'string' ? `ok ${parsed}` : parsed.rule;
}

describe('timestamps', () => {
  it.each([
    ['2026-11-30T06:00:00.123456', '2026-11-30T06:00:00.123456+00:00'],
    ['2026-11-30T06:00:00', '2026-11-30T06:00:00.000000+00:00'],
    ['2026-11-30T06:00:00Z', '2026-11-30T06:00:00.000000+00:00'],
    ['2026-11-30T06:00:00.5Z', '2026-11-30T06:00:00.500000+00:00'],
    ['2026-11-30T06:00:00.000001', '2026-11-30T06:00:00.000001+00:00'],
    ['2026-11-30T06:00:00.999999+00:00', '2026-11-30T06:00:00.999999+00:00'],
    ['2026-11-30T06:00:00.120-00:00', '2026-11-30T06:00:00.120000+00:00'],
  ])('keeps microseconds exactly and writes UTC explicitly: %s', (text, expected) => {
    expect(parseTimestamp(text)).toBe(expected);
  });

  it.each([
    ['2026-11-30T09:30:00+03:30', '2026-11-30T06:00:00.000000+00:00'],
    ['2026-11-30T01:00:00.123456+03:30', '2026-11-29T21:30:00.123456+00:00'],
    ['2026-11-30T22:00:00.654321-05:00', '2026-12-01T03:00:00.654321+00:00'],
    ['2026-12-31T23:30:00.000001-01:00', '2027-01-01T00:30:00.000001+00:00'],
    ['2027-01-01T00:15:59.999999+00:30', '2026-12-31T23:45:59.999999+00:00'],
    ['2028-02-28T23:00:00-01:00', '2028-02-29T00:00:00.000000+00:00'],
    ['2028-03-01T00:59:00+01:00', '2028-02-29T23:59:00.000000+00:00'],
    ['2100-03-01T00:00:00+00:01', '2100-02-28T23:59:00.000000+00:00'],
    ['0099-12-31T23:00:00-02:00', '0100-01-01T01:00:00.000000+00:00'],
    ['0001-01-01T05:00:00+04:59', '0001-01-01T00:01:00.000000+00:00'],
    ['9999-12-31T23:59:59.999999+23:59', '9999-12-31T00:00:59.999999+00:00'],
  ])('honours the offset, across days, months, years and leap days: %s', (text, expected) => {
    expect(parseTimestamp(text)).toBe(expected);
  });

  it.each([
    '2026-11-30 06:00:00',
    '2026-11-30',
    '2026-11-30T06:00',
    '2026-11-30T06:00:00+0330',
    '2026-11-30T06:00:00+03',
    '2026-11-30T06:00:00.1234567',
    '2026-11-30T06:00:00.',
    '2026-11-30T06:00:00,5',
    '2026-11-30t06:00:00',
    '2026-11-30T06:00:00z',
    '2026-11-30T06:00:00 Z',
    ' 2026-11-30T06:00:00',
    '2026-11-30T06:00:00\n',
    '26-11-30T06:00:00',
    '+02026-11-30T06:00:00',
    '2026-1-30T06:00:00',
    '２０２６-11-30T06:00:00',
    '2026-11-30T06:00:00UTC',
    '2026-11-30T06:00:00.123456Z+01:00',
    '',
  ])('rejects a text not of the exact form: %j', (text) => {
    expect(ruleOf(text)).toBe(FORMAT);
  });

  it.each([
    '2026-02-29T00:00:00',
    '2026-02-30T00:00:00',
    '2100-02-29T00:00:00',
    '2026-04-31T00:00:00',
    '2026-13-01T00:00:00',
    '2026-00-10T00:00:00',
    '2026-11-00T00:00:00',
    '0000-01-01T00:00:00',
    '2026-11-30T24:00:00',
    '2026-11-30T23:60:00',
    '2026-11-30T23:59:60',
    '2026-11-30T06:00:00+24:00',
    '2026-11-30T06:00:00+03:60',
  ])('rejects an impossible date or time: %s', (text) => {
    expect(ruleOf(text)).toBe(CALENDAR);
  });

  it('accepts leap days of leap years', () => {
    expect(parseTimestamp('2028-02-29T12:00:00')).toBe('2028-02-29T12:00:00.000000+00:00');
    expect(parseTimestamp('2000-02-29T12:00:00')).toBe('2000-02-29T12:00:00.000000+00:00');
  });

  it('rejects an offset that moves the instant out of years 0001..9999', () => {
    expect(ruleOf('0001-01-01T00:00:00+00:01')).toBe(RANGE);
    expect(ruleOf('9999-12-31T23:59:00-00:01')).toBe(RANGE);
    expect(ruleOf('9999-12-31T23:59:59.999999Z')).toBe('ok 9999-12-31T23:59:59.999999+00:00');
    expect(ruleOf('0001-01-01T00:00:00Z')).toBe('ok 0001-01-01T00:00:00.000000+00:00');
  });

  it('normalised output sorts like the instants it denotes', () => {
    const a = parseTimestamp('2026-11-30T06:00:00.000001+01:00');
    const b = parseTimestamp('2026-11-30T05:00:00.000002Z');
    expect(typeof a === 'string' && typeof b === 'string' && a < b).toBe(true);
  });

  it('calendar arithmetic agrees with Date for every day of years 1..9999 (sampled)', () => {
    fc.assert(
      fc.property(fc.integer({ min: daysFromCivil(1, 1, 1), max: daysFromCivil(9999, 12, 31) }), (days) => {
        const date = new Date(0);
        date.setUTCFullYear(1970, 0, 1 + days);
        const [year, month, day] = civilFromDays(days);
        expect([year, month, day]).toEqual([date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()]);
        expect(daysFromCivil(year, month, day)).toBe(days);
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees with Date on the instant for any valid timestamp with an offset (to the millisecond, micros kept)', () => {
    const digits = (n: number, width: number) => String(n).padStart(width, '0');
    fc.assert(
      fc.property(
        fc.date({ min: new Date('0001-01-02T00:00:00Z'), max: new Date('9999-12-30T00:00:00Z'), noInvalidDate: true }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }),
        (instant, microsOfMilli, offsetMinutes) => {
          const local = new Date(instant.getTime() + offsetMinutes * 60_000);
          const sign = offsetMinutes < 0 ? '-' : '+';
          const abs = Math.abs(offsetMinutes);
          const fraction = `${digits(local.getUTCMilliseconds(), 3)}${digits(microsOfMilli, 3)}`;
          const text =
            `${digits(local.getUTCFullYear(), 4)}-${digits(local.getUTCMonth() + 1, 2)}-${digits(local.getUTCDate(), 2)}` +
            `T${digits(local.getUTCHours(), 2)}:${digits(local.getUTCMinutes(), 2)}:${digits(local.getUTCSeconds(), 2)}` +
            `.${fraction}${sign}${digits(Math.floor(abs / 60), 2)}:${digits(abs % 60, 2)}`;
          const expected = `${instant.toISOString().slice(0, 23)}${digits(microsOfMilli, 3)}+00:00`;
          expect(parseTimestamp(text)).toBe(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('the zod block reports required, non-strings and the rules', () => {
    expect(timestamp.safeParse('2026-11-30T06:00:00').data).toBe('2026-11-30T06:00:00.000000+00:00');
    expect(timestamp.safeParse(undefined).error?.issues[0]?.message).toBe('required');
    expect(timestamp.safeParse(null).error?.issues[0]?.message).toBe('required');
    expect(timestamp.safeParse(1764482400000).error?.issues[0]?.message).toBe(FORMAT);
    expect(timestamp.safeParse('2026-02-30T00:00:00').error?.issues[0]?.message).toBe(CALENDAR);
  });
});
