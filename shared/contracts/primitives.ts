import { z } from 'zod';
import type { UtcTimestamp } from './types.js';

/**
 * Building blocks of the message contracts (docs/design.md section 5). Every block reports ONE rule, phrased
 * so that `<field>: <rule>` is a complete dead-letter detail; a missing or `null` required field
 * reports `required`. Blocks are built once, at module load.
 */

/** Inclusive ranges of the PostgreSQL integer column types, as far as a JS number is exact. */
export const COLUMN_RANGES = {
  smallint: { min: -32_768, max: 32_767 },
  integer: { min: -2_147_483_648, max: 2_147_483_647 },
  bigint: { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER },
} as const;

/** Name of a PostgreSQL integer column type. */
export type IntegerColumn = keyof typeof COLUMN_RANGES;

/** Lower and upper bound (inclusive); an absent bound is the column's own. */
export interface Bounds {
  readonly min?: number;
  readonly max?: number;
}

/**
 * A JSON number whose source text denotes another decimal than the double `JSON.parse` made of
 * it, e.g. `17.0000000000000001` (parsed as the whole number 17) or `4.990000000000000001`
 * (parsed as 4.99). The decoder puts it in place of the number so that integer and price fields
 * reject it instead of storing a silently changed value; plain number fields unwrap it.
 */
export class InexactNumber {
  constructor(
    /** What `JSON.parse` made of the text. */
    readonly value: number,
    /** The number exactly as the message wrote it. */
    readonly source: string,
  ) {}
}

/** Error option for a block: `required` for a missing or null value, else the block's rule. */
function ruleOrRequired(rule: string): { error: (issue: { readonly input?: unknown }) => string } {
  return { error: (issue) => (issue.input === undefined || issue.input === null ? 'required' : rule) };
}

/** Makes a block optional: absent and `null` both come out as `null`. */
export function optional<T extends z.ZodType>(schema: T) {
  return schema.nullable().default(null);
}

// ---- text ------------------------------------------------------------------------------------

/** Why a string cannot be stored in a PostgreSQL text column, or `null` if it can. */
export function unstorableTextProblem(value: string): string | null {
  if (value.includes('\0')) return 'must not contain a NUL character';
  if (!value.isWellFormed()) return 'must not contain a lone surrogate';
  return null;
}

/**
 * Whether `value` has at most `max` Unicode code points (as PostgreSQL counts characters).
 * Never allocates; a string of at most `max` UTF-16 units is within `max` without counting.
 */
export function codePointsAtMost(value: string, max: number): boolean {
  if (value.length <= max) return true;
  if (value.length > 2 * max) return false;
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    if (++count > max) return false;
  }
  return true;
}

/** A string that passes `isValid` and is storable (no NUL, no lone surrogate), else `rule`. */
function storableString(rule: string, isValid: (value: string) => boolean) {
  return z.string(ruleOrRequired(rule)).check((payload) => {
    const value = payload.value;
    const problem = unstorableTextProblem(value);
    if (problem !== null || !isValid(value)) {
      payload.issues.push({ code: 'custom', message: problem ?? rule, input: value });
    }
  });
}

/**
 * A storable string of `min`..`max` characters (code points); without `max`, any length (TEXT).
 * `min` is 0 or 1, all the contracts need (one code point is at least one UTF-16 unit).
 */
export function text(bounds: { readonly min?: 0 | 1; readonly max?: number } = {}) {
  const { min = 0, max } = bounds;
  if (max === undefined) return storableString('must be a string', () => true);
  const rule = min > 0 ? `must be a string of ${min} to ${max} characters` : `must be a string of at most ${max} characters`;
  return storableString(rule, (value) => value.length >= min && codePointsAtMost(value, max));
}

const WHITESPACE = /\s/;

/** `package_name`: 1..255 characters, no whitespace. */
export const packageName = storableString(
  'must be a string of 1 to 255 characters without whitespace',
  (value) => value.length > 0 && codePointsAtMost(value, 255) && !WHITESPACE.test(value),
);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const UUID_RULE = 'must be a UUID (8-4-4-4-12 hexadecimal digits)';

/**
 * A UUID of any version in the hyphenated 8-4-4-4-12 form, output in lower case so that the same
 * UUID is one natural key when batches are de-duplicated.
 */
export const uuid = z.string(ruleOrRequired(UUID_RULE)).check((payload) => {
  if (UUID.test(payload.value)) payload.value = payload.value.toLowerCase();
  else payload.issues.push({ code: 'custom', message: UUID_RULE, input: payload.value });
});

const CURRENCY_RULE = 'must be 3 upper-case letters A-Z';

/** An ISO 4217-style currency code: exactly 3 upper-case ASCII letters. */
export const currency = z.string(ruleOrRequired(CURRENCY_RULE)).regex(/^[A-Z]{3}$/, { error: CURRENCY_RULE });

// ---- numbers ---------------------------------------------------------------------------------

/** Whether `value` is a safe integer within `[min, max]`; booleans, strings, `InexactNumber` are not. */
export function isIntegerWithin(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

/**
 * An integer for a column of type `column`, optionally narrowed by `bounds`. A whole JSON number
 * (`17.0`, `1e2`) is the integer it denotes; anything beyond 2^53-1 is rejected (never rounded).
 */
export function integer(column: IntegerColumn, bounds: Bounds = {}) {
  const min = Math.max(bounds.min ?? COLUMN_RANGES[column].min, COLUMN_RANGES[column].min);
  const max = Math.min(bounds.max ?? COLUMN_RANGES[column].max, COLUMN_RANGES[column].max);
  const rule = `must be an integer between ${min} and ${max}`;
  // One check that validates and normalises (a refine plus an overwrite cost two passes).
  return z.number(ruleOrRequired(rule)).check((payload) => {
    const value = payload.value;
    if (isIntegerWithin(value, min, max)) payload.value = withoutNegativeZero(value);
    else payload.issues.push({ code: 'custom', message: rule, input: value });
  });
}

/** `-0` (valid JSON) as `0`, so that equal numbers are written alike. */
function withoutNegativeZero(value: number): number {
  return value + 0;
}

function unwrapInexact(value: unknown): unknown {
  if (typeof value === 'number') return withoutNegativeZero(value);
  return value instanceof InexactNumber ? withoutNegativeZero(value.value) : value;
}

/** A finite number (DOUBLE PRECISION) within `bounds`. */
export function finiteNumber(bounds: { readonly min: number; readonly max?: number }) {
  const { min, max = Number.POSITIVE_INFINITY } = bounds;
  const rule = max === Number.POSITIVE_INFINITY ? `must be a number >= ${min}` : `must be a number between ${min} and ${max}`;
  return z.preprocess(
    unwrapInexact,
    z.number(ruleOrRequired(rule)).refine((value) => value >= min && value <= max, { error: rule }),
  );
}

/** Largest value of NUMERIC(12,2). */
export const MAX_PRICE = 9_999_999_999.99;
const PRICE_RULE = `must be a number between 0 and ${MAX_PRICE} with at most 2 decimal places`;

/**
 * A price for NUMERIC(12,2), output as exact decimal text with two decimals (`"4.99"`, `"0.00"`).
 * A number with more than two decimal places is rejected, never rounded.
 */
export const price = z.number(ruleOrRequired(PRICE_RULE)).check((payload) => {
  const value = payload.value;
  // n/100 is the double nearest to the 2-decimal number n/100: equality means the message wrote at
  // most 2 decimals (the decoder has already replaced a longer text that parses alike).
  if (value >= 0 && value <= MAX_PRICE && Math.round(value * 100) / 100 === value) {
    (payload as { value: unknown }).value = value.toFixed(2);
  } else {
    payload.issues.push({ code: 'custom', message: PRICE_RULE, input: value });
  }
}) as unknown as z.ZodType<string, number>;

const HISTOGRAM_RULE = 'must be an array of exactly 5 integers >= 0';

/** The rating histogram: exactly 5 integers >= 0 (BIGINT[]). */
export const histogram = z
  .array(integer('bigint', { min: 0 }), ruleOrRequired(HISTOGRAM_RULE))
  // Not `.length(5)`: zod runs that check even after a type error (a string has a length too).
  .refine((values) => values.length === 5, { error: HISTOGRAM_RULE });

const PROTOCOLS_RULE = 'must be an object of protocol name -> integer >= 0';
const PROTOCOL_NAME_RULE = 'protocol name must be 1 to 64 characters';
const PROTOCOL_COUNT_RULE = `must be an integer between 0 and ${Number.MAX_SAFE_INTEGER}`;

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof InexactNumber);
}

/**
 * Protocol name (1..64 characters) -> count (integer >= 0), for JSONB. Written by hand rather than
 * with `z.record`, which silently drops a `__proto__` key: every name the message holds is kept.
 */
export const protocols = z
  .custom<Record<string, unknown>>(isJsonObject, ruleOrRequired(PROTOCOLS_RULE))
  .transform((input, payload) => {
    const output: Record<string, number> = {};
    for (const name of Object.keys(input)) {
      const count = input[name];
      if (name.length === 0 || !codePointsAtMost(name, 64) || unstorableTextProblem(name) !== null) {
        payload.issues.push({ code: 'custom', message: PROTOCOL_NAME_RULE, input: name, path: [name] });
      } else if (!isIntegerWithin(count, 0, Number.MAX_SAFE_INTEGER)) {
        payload.issues.push({ code: 'custom', message: PROTOCOL_COUNT_RULE, input: count, path: [name] });
      } else {
        Object.defineProperty(output, name, { value: withoutNegativeZero(count), enumerable: true, writable: true, configurable: true });
      }
    }
    return output;
  });

// ---- timestamps ------------------------------------------------------------------------------

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
  const hasOffset = fractionEnd < value.length && value.charCodeAt(fractionEnd) !== 0x5a /* Z */;
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
  return `${pad(utcYear, 4)}-${pad(utcMonth, 2)}-${pad(utcDay, 2)}T${pad(utcHour, 2)}:${pad(utcMinute, 2)}:${second}.${micros}+00:00` as UtcTimestamp;
}

/** A contract timestamp, normalised to UTC with six fractional digits (see `parseTimestamp`). */
// A check that writes the normalised value back (as `.overwrite()` does) rather than a transform:
// a transform is a pipe, one more schema run and payload per field, and a review has 3 of these.
export const timestamp = z.string(ruleOrRequired(TIMESTAMP_FORMAT_RULE)).check((payload) => {
  const parsed = parseTimestamp(payload.value);
  if (typeof parsed === 'string') payload.value = parsed;
  else payload.issues.push({ code: 'custom', message: parsed.rule, input: payload.value });
}) as z.ZodType<string> as z.ZodType<UtcTimestamp, string>;
