/**
 * How the commands print: plain text tables for people, and JSON for scripts with bigints as
 * strings, so offsets stay exact.
 */
import { redactConnectionDetails } from '../shared/redaction.js';

/** One column of a text table: its header, how to read a cell, and numbers aligned right. */
export interface Column<R> {
  readonly header: string;
  readonly value: (row: R) => string | number | bigint | null | undefined;
  readonly align?: 'left' | 'right';
}

/** A cell as text: absent values show as `-`. */
function cell(value: string | number | bigint | null | undefined): string {
  if (value === null || value === undefined || value === '') return '-';
  return String(value);
}

/**
 * A plain text table (header, then one line per row, columns padded to their widest cell),
 * ending in a newline; `(none)` under the header when there are no rows.
 */
export function renderTable<R>(columns: readonly Column<R>[], rows: readonly R[]): string {
  const cells = rows.map((row) => columns.map((column) => cell(column.value(row)).replaceAll('\n', ' ')));
  const widths = columns.map((column, index) => Math.max(column.header.length, ...cells.map((line) => line[index]?.length ?? 0)));
  const format = (line: readonly string[]) =>
    line
      .map((text, index) => {
        const width = widths[index] ?? 0;
        return columns[index]?.align === 'right' ? text.padStart(width) : text.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  const lines = [format(columns.map((column) => column.header)), ...cells.map(format)];
  if (rows.length === 0) lines.push('(none)');
  return `${lines.join('\n')}\n`;
}

/** JSON for scripts: bigints as strings (offsets never pass through `Number`), two-space indent. */
export function renderJson(value: unknown): string {
  return `${JSON.stringify(value, (_key, inner: unknown) => (typeof inner === 'bigint' ? inner.toString() : inner), 2)}\n`;
}

/** Shortens a long text for a table cell; the JSON output always carries it whole. */
export function ellipsis(text: string, max = 60): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}

/**
 * An error's message as the CLI shows it, through the one redaction (shared/redaction.ts); with
 * `withCause`, its cause's message in parentheses when the message does not already carry it (the
 * error line of a command that failed). Every error text a command prints, in its error line, a
 * table or a report, comes from here.
 */
export function errorText(error: unknown, options: { readonly withCause?: boolean } = {}): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause =
    options.withCause === true && error instanceof Error && error.cause instanceof Error && !message.includes(error.cause.message)
      ? ` (${error.cause.message})`
      : '';
  return redactConnectionDetails(`${message}${cause}`);
}
