import type { z } from 'zod';

/** `ok <output as JSON>` or `<path>: <message>` of the first issue: a schema's verdict on one input, as text. */
export function schemaOutcome(schema: z.ZodType, input: unknown): string {
  const result = schema.safeParse(input);
  if (result.success) return `ok ${JSON.stringify(result.data)}`;
  const issue = result.error.issues[0];
  return `${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`;
}
