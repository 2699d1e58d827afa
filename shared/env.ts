import { z } from 'zod';
import { ConfigurationError } from './errors.js';

/** The environment as settings read it: a plain map of variable names to values. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** A whole number from a variable, within bounds. */
export const integerVariable = (min: number, max: number = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

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

/**
 * Reads one variable through a schema, or returns `fallback` when it is unset or empty.
 * A bad value is a ConfigurationError that names the variable and the value's problem.
 */
export function readVariable<T>(env: Environment, name: string, schema: z.ZodType<T>, fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const problem = parsed.error.issues.map((issue) => issue.message).join('; ');
    throw new ConfigurationError(`${name}=${JSON.stringify(raw)} is invalid: ${problem}`);
  }
  return parsed.data;
}

/** Like `readVariable`, for a variable that must be set. */
export function requireVariable<T>(env: Environment, name: string, schema: z.ZodType<T>): T {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') throw new ConfigurationError(`${name} is required but not set`);
  return readVariable(env, name, schema, undefined as T);
}

/** Deep-freezes a settings object so nothing can change it after start-up. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
