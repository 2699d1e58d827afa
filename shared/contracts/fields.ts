/**
 * What every building block of the message contracts (docs/design.md section 5) shares. Every
 * block reports ONE rule, phrased so that `<field>: <rule>` is a complete dead-letter detail; a
 * missing or `null` required field reports `required`. Blocks are built once, at module load.
 * The blocks themselves: text.ts, numbers.ts, timestamps.ts.
 */
import type { z } from 'zod';

/** Error option for a block: `required` for a missing or null value, else the block's rule. */
export function ruleOrRequired(rule: string): { error: (issue: { readonly input?: unknown }) => string } {
  return { error: (issue) => (issue.input === undefined || issue.input === null ? 'required' : rule) };
}

/** Makes a block optional: absent and `null` both come out as `null`. */
export function optional<T extends z.ZodType>(schema: T) {
  return schema.nullable().default(null);
}
