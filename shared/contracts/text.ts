/**
 * Text blocks of the message contracts: strings PostgreSQL can store, counted in code points as it
 * counts characters, and the text-shaped values (package name, UUID, currency).
 */
import { z } from 'zod';
import { ruleOrRequired } from './fields.js';

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
