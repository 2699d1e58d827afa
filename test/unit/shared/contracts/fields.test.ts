import { describe, expect, it } from 'vitest';
import { optional } from '../../../../shared/contracts/fields.js';
import { integer } from '../../../../shared/contracts/numbers.js';
import { schemaOutcome as outcome } from '../../../helpers/schemas.js';

describe('optional', () => {
  it('absent and null come out as null; a present value is still checked', () => {
    const schema = optional(integer('integer', { min: 0 }));
    expect(outcome(schema, undefined)).toBe('ok null');
    expect(outcome(schema, null)).toBe('ok null');
    expect(outcome(schema, 3)).toBe('ok 3');
    expect(outcome(schema, -3)).toBe(': must be an integer between 0 and 2147483647');
  });
});
