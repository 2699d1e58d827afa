/**
 * Number blocks of the message contracts: integers per column type (exact, never rounded), finite
 * numbers, prices as exact decimal text, and the collections of counts (histogram, protocols).
 */
import { z } from 'zod';
import { ruleOrRequired } from './fields.js';
import { codePointsAtMost, unstorableTextProblem } from './text.js';

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

/** Whether `value` is a safe integer within `[min, max]`; booleans, strings, `InexactNumber` are not. */
function isIntegerWithin(value: unknown, min: number, max: number): value is number {
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
const MAX_PRICE = 9_999_999_999.99;
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
export const protocols = z.custom<Record<string, unknown>>(isJsonObject, ruleOrRequired(PROTOCOLS_RULE)).transform((input, payload) => {
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
