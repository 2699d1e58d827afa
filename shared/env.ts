/**
 * What the settings are read with: the `Environment` every loader takes, the schemas the setting
 * declarations parse variables with (whole numbers within bounds, durations, sizes, booleans,
 * lists), and the deep freeze that keeps loaded settings unchanged after start-up.
 */
import { z } from 'zod';

/** The environment as settings read it: a plain map of variable names to values. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** A whole number from a variable, within bounds (`unit` named in the bounds' message). */
export const integerVariable = (min: number, max: number = Number.MAX_SAFE_INTEGER, unit = '') => {
  const bounds = `must be from ${min} to ${max}${unit === '' ? '' : ` ${unit}`}`;
  return z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, bounds).max(max, bounds));
};

/** A duration in milliseconds, within bounds. */
export const millisecondsVariable = (min: number, max: number) => integerVariable(min, max, 'ms');

/** A size in bytes, within bounds. */
export const bytesVariable = (min: number, max: number) => integerVariable(min, max, 'bytes');

/** `true`/`false` (also `1`/`0`, `yes`/`no`), case-insensitive. */
export const booleanVariable = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' }))
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

/** A comma-separated list; blanks dropped. */
export const listVariable = z.string().transform((value) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0),
);

/** Deep-freezes a settings object so nothing can change it after start-up. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
