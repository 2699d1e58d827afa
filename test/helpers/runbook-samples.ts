/**
 * The sample outputs of docs/operations.md, as data: a sample is a fenced `console` block right
 * after a `<!-- sample: <name> -->` marker, made of steps, each a `$ <command>` line followed by
 * what the command printed (stdout and stderr, in order) and, when it did not exit 0, a last line
 * `[exit N]`. test/integration/runbook-samples.test.ts runs every step's command exactly as written
 * on a real stack and compares; `npm run docs:samples` writes what it printed back into the file.
 */

/** One command of a sample and what the document says it prints. */
export interface SampleStep {
  readonly command: string;
  readonly output: string;
}

/** One marked block of the document. */
export interface Sample {
  readonly name: string;
  readonly steps: readonly SampleStep[];
  /** Offsets of the block's body (between the fences) in the document. */
  readonly bodyStart: number;
  readonly bodyEnd: number;
}

const SAMPLE = /<!-- sample: ([a-z0-9-]+) -->\n```console\n([\s\S]*?)```/g;

/** The marked samples of a document, in order. */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const match of text.matchAll(SAMPLE)) {
    const [whole, name, body] = match as unknown as [string, string, string];
    const bodyStart = (match.index ?? 0) + whole.indexOf('```console\n') + '```console\n'.length;
    const steps: SampleStep[] = [];
    let current: { command: string; lines: string[] } | undefined;
    for (const line of body.replace(/\n$/, '').split('\n')) {
      if (line.startsWith('$ ')) {
        if (current) steps.push({ command: current.command, output: current.lines.join('\n') });
        current = { command: line.slice(2), lines: [] };
      } else if (current) {
        current.lines.push(line);
      } else {
        throw new Error(`sample ${name}: its block must start with a "$ <command>" line, not ${JSON.stringify(line)}`);
      }
    }
    if (current) steps.push({ command: current.command, output: current.lines.join('\n') });
    if (samples.some((sample) => sample.name === name)) throw new Error(`sample ${name} is marked twice`);
    samples.push({ name, steps, bodyStart, bodyEnd: bodyStart + body.length });
  }
  return samples;
}

/** The block body of a sample whose steps printed `outputs`. */
export function renderSample(steps: ReadonlyArray<SampleStep>): string {
  return steps.map((step) => [`$ ${step.command}`, ...(step.output === '' ? [] : [step.output])].join('\n')).join('\n') + '\n';
}

/** `text` with the bodies of `samples` replaced by `bodies` (same order). */
export function replaceSamples(text: string, samples: ReadonlyArray<Sample>, bodies: ReadonlyArray<string>): string {
  let out = '';
  let at = 0;
  samples.forEach((sample, index) => {
    out += text.slice(at, sample.bodyStart) + (bodies[index] ?? '');
    at = sample.bodyEnd;
  });
  return out + text.slice(at);
}

/**
 * A command line split as a POSIX shell would split this subset: words, `'single'` and
 * `"double"` quotes, leading `NAME=value` assignments (returned apart).
 */
export function splitCommand(line: string): { readonly env: Record<string, string>; readonly words: string[] } {
  const words: string[] = [];
  let word: string | undefined;
  let quote: "'" | '"' | undefined;
  for (const char of line) {
    if (quote) {
      if (char === quote) quote = undefined;
      else word = (word ?? '') + char;
    } else if (char === "'" || char === '"') {
      quote = char;
      word ??= '';
    } else if (char === ' ') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else {
      word = (word ?? '') + char;
    }
  }
  if (quote) throw new Error(`unclosed quote in ${line}`);
  if (word !== undefined) words.push(word);
  const env: Record<string, string> = {};
  while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0] ?? '')) {
    const [name, ...value] = (words.shift() ?? '').split('=');
    env[name ?? ''] = value.join('=');
  }
  return { env, words };
}

/**
 * Output compared as people read it: trailing spaces, runs of spaces and the length of a table's
 * rule (`-----+---`) do not count, so a normalised value of another width still compares equal.
 */
export function comparable(text: string): string {
  return text
    .split('\n')
    .map((line) => line.replace(/\s+$/, '').replace(/ {2,}/g, ' ').replace(/-{2,}/g, '--'))
    .join('\n')
    .replace(/\n+$/, '');
}

/** PostgreSQL types psql aligns to the right (int2, int4, int8, oid, float4, float8, numeric). */
const NUMERIC_TYPES: ReadonlySet<number> = new Set([20, 21, 23, 26, 700, 701, 1700]);

/**
 * A result in psql's default aligned format: centred headers, ` | ` between columns, numbers to
 * the right, NULL as nothing, and the `(N rows)` footer.
 */
export function renderPsqlTable(
  fields: ReadonlyArray<{ readonly name: string; readonly dataTypeID: number }>,
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
): string {
  const width = (text: string) => [...text].length;
  const widths = fields.map((field, column) => Math.max(width(field.name), ...rows.map((row) => width(row[column] ?? ''))));
  const centre = (text: string, size: number) => {
    const left = Math.floor((size - width(text)) / 2);
    return ' '.repeat(left) + text + ' '.repeat(size - width(text) - left);
  };
  const cell = (text: string, column: number) => {
    const size = widths[column] ?? 0;
    const pad = ' '.repeat(size - width(text));
    return NUMERIC_TYPES.has(fields[column]?.dataTypeID ?? 0) ? pad + text : text + pad;
  };
  const line = (cells: string[]) => ` ${cells.join(' | ')}`.replace(/\s+$/, '');
  const out = [
    line(fields.map((field, column) => centre(field.name, widths[column] ?? 0))),
    widths.map((size) => '-'.repeat(size + 2)).join('+'),
    ...rows.map((row) => line(row.map((value, column) => cell(value ?? '', column)))),
    `(${rows.length} ${rows.length === 1 ? 'row' : 'rows'})`,
  ];
  return `${out.join('\n')}\n`;
}
