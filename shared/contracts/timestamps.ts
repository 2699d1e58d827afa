/**
 * The timestamp block of the message contracts (docs/design.md section 5): the one format a
 * timestamp may have, and its normalisation to UTC with six fractional digits, computed on integers
 * (never a `Date`), so microseconds and every year from 0001 to 9999 come through exactly.
 */
import { z } from 'zod';
import { ruleOrRequired } from './fields.js';

/**
 * A timestamp as decoded from a message: always normalised to UTC with six fractional digits,
 * `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`, so that
 *  - PostgreSQL receives an explicit offset (no dependence on a session or machine time zone),
 *  - microseconds are kept exactly (never rounded through a JavaScript `Date`),
 *  - two values compare correctly as plain strings (used by the reviews de-duplication).
 */
export type UtcTimestamp = string & { readonly __brand: 'UtcTimestamp' };

/** Why a text is not a contract timestamp (one shared instance per rule). */
export interface TimestampViolation {
  readonly rule: string;
}

const TIMESTAMP_FORMAT_RULE = 'must be a timestamp YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM|-HH:MM]';
const NOT_A_FORMAT: TimestampViolation = Object.freeze({ rule: TIMESTAMP_FORMAT_RULE });
const NOT_A_CALENDAR_TIME: TimestampViolation = Object.freeze({ rule: 'must be a real calendar date and time' });
const OUT_OF_RANGE: TimestampViolation = Object.freeze({ rule: 'must fall within the years 0001 to 9999 in UTC' });

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?$/;
const MINUTES_PER_DAY = 1440;

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysInMonth(year: number, month: number): number {
  return month === 2 ? (isLeapYear(year) ? 29 : 28) : month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** The proleptic Gregorian date `[year, month, day]` of a day number (inverse of `daysFromCivil`). */
export function civilFromDays(days: number): [number, number, number] {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1;
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  return [yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day];
}

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

/** The number written by the ASCII digits `text[start .. start + count)` (already validated). */
function digitsAt(text: string, start: number, count: number): number {
  let result = 0;
  for (let i = start; i < start + count; i++) result = result * 10 + text.charCodeAt(i) - 0x30;
  return result;
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

/**
 * Parses a contract timestamp and normalises it to UTC, `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`:
 * without an offset the text is UTC; with one, the instant is moved to UTC in integer minutes
 * (no `Date`, so microseconds and years < 100 survive exactly).
 */
export function parseTimestamp(value: string): UtcTimestamp | TimestampViolation {
  if (!TIMESTAMP.test(value)) return NOT_A_FORMAT;
  // The pattern fixes the positions of everything but the fraction and the offset.
  const year = digitsAt(value, 0, 4);
  const month = digitsAt(value, 5, 2);
  const day = digitsAt(value, 8, 2);
  const hour = digitsAt(value, 11, 2);
  const minute = digitsAt(value, 14, 2);
  const second = value.slice(17, 19);
  let fractionEnd = 19;
  if (value.charCodeAt(19) === 0x2e /* . */) {
    fractionEnd = 20;
    while (fractionEnd < value.length && isDigit(value.charCodeAt(fractionEnd))) fractionEnd++;
  }
  const micros = fractionEnd === 19 ? '000000' : value.slice(20, fractionEnd).padEnd(6, '0');
  const hasOffset = fractionEnd < value.length && value.charCodeAt(fractionEnd) !== 0x5a; /* Z */
  const offsetHours = hasOffset ? digitsAt(value, fractionEnd + 1, 2) : 0;
  const offsetMinutes = hasOffset ? digitsAt(value, fractionEnd + 4, 2) : 0;
  if (
    year < 1 ||
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > '59' ||
    offsetHours > 23 ||
    offsetMinutes > 59
  ) {
    return NOT_A_CALENDAR_TIME;
  }
  const shift = (value.charCodeAt(fractionEnd) === 0x2d /* - */ ? -1 : 1) * (offsetHours * 60 + offsetMinutes);
  if (shift === 0) return `${value.slice(0, 19)}.${micros}+00:00` as UtcTimestamp;
  const total = daysFromCivil(year, month, day) * MINUTES_PER_DAY + hour * 60 + minute - shift;
  const utcDays = Math.floor(total / MINUTES_PER_DAY);
  const minuteOfDay = total - utcDays * MINUTES_PER_DAY;
  const [utcYear, utcMonth, utcDay] = civilFromDays(utcDays);
  if (utcYear < 1 || utcYear > 9999) return OUT_OF_RANGE;
  const utcHour = Math.floor(minuteOfDay / 60);
  const utcMinute = minuteOfDay % 60;
  const date = `${pad(utcYear, 4)}-${pad(utcMonth, 2)}-${pad(utcDay, 2)}`;
  return `${date}T${pad(utcHour, 2)}:${pad(utcMinute, 2)}:${second}.${micros}+00:00` as UtcTimestamp;
}

/** A contract timestamp, normalised to UTC with six fractional digits (see `parseTimestamp`). */
// A check that writes the normalised value back (as `.overwrite()` does) rather than a transform:
// a transform is a pipe, one more schema run and payload per field, and a review has 3 of these.
export const timestamp = z.string(ruleOrRequired(TIMESTAMP_FORMAT_RULE)).check((payload) => {
  const parsed = parseTimestamp(payload.value);
  if (typeof parsed === 'string') payload.value = parsed;
  else payload.issues.push({ code: 'custom', message: parsed.rule, input: payload.value });
}) as z.ZodType<string> as z.ZodType<UtcTimestamp, string>;
