/**
 * PostgreSQL array literals for the array parameters of the batch statements (one array per column:
 * the upsert in upsert.ts, the dead-letter insert in dead-letters.ts), built here for speed and
 * byte for byte as node-postgres would send them.
 */
const QUOTE_OR_BACKSLASH = /["\\]/;

/**
 * `values` as the PostgreSQL array literal node-postgres itself sends for the array (every element
 * double-quoted, `"` and `\\` escaped, `NULL` unquoted: byte for byte what `pg`'s `prepareValue`
 * makes of it), or `values` unchanged when an element is anything but a string, number,
 * boolean, bigint or null (e.g. a Buffer for a bytea column: the driver serialises those).
 * Built here because the driver runs two regex replacements on every element, where a string
 * without a quote or backslash needs none: the reviews upsert sends 14 arrays of 500 elements
 * per batch.
 */
export function arrayLiteral(values: readonly unknown[]): string | readonly unknown[] {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    if (i > 0) literal += ',';
    const value = values[i];
    if (value === null || value === undefined) literal += 'NULL';
    else if (typeof value === 'string') {
      literal += QUOTE_OR_BACKSLASH.test(value) ? `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : `"${value}"`;
    } else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') literal += `"${String(value)}"`;
    else return values;
  }
  return `${literal}}`;
}
