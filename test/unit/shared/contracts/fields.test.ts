import type { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { optional } from '../../../../shared/contracts/fields.js';
import { integer } from '../../../../shared/contracts/numbers.js';
/** `ok <output as JSON>` or `<path>: <message>` of the first issue. */
function outcome(schema: z.ZodType, input: unknown): string {
  const result = schema.safeParse(input);
  if (result.success) return `ok ${JSON.stringify(result.data)}`;
  const issue = result.error.issues[0];
  return `${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`;
}

describe('optional', () => {
  it('absent and null come out as null; a present value is still checked', () => {
    const schema = optional(integer('integer', { min: 0 }));
    expect(outcome(schema, undefined)).toBe('ok null');
    expect(outcome(schema, null)).toBe('ok null');
    expect(outcome(schema, 3)).toBe('ok 3');
    expect(outcome(schema, -3)).toBe(': must be an integer between 0 and 2147483647');
  });
});
