import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/command.js';
import { COMMANDS, main } from '../../../cli/main.js';
import { renderJson, renderTable } from '../../../cli/output.js';
import { instantText, parseDuration, parseInstant, parseSince } from '../../../cli/time.js';

/** Runs the CLI in-process with no services reachable: only argument handling can succeed. */
async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env: { KAFKA_BROKERS: '127.0.0.1:1', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
  });
  return { code, stdout, stderr };
}

describe('durations, instants', () => {
  it('reads 30d, 12h, 90m, 45s, 2w', () => {
    expect(parseDuration('30d', '--older-than')).toBe(30 * 86_400_000);
    expect(parseDuration('12h', '--older-than')).toBe(12 * 3_600_000);
    expect(parseDuration('90m', '--older-than')).toBe(90 * 60_000);
    expect(parseDuration('45s', '--older-than')).toBe(45_000);
    expect(parseDuration('2w', '--older-than')).toBe(14 * 86_400_000);
  });

  it('refuses anything else, naming the option', () => {
    for (const text of ['30', 'd', '30 days', '-1d', '1.5h', '']) {
      expect(() => parseDuration(text, '--older-than')).toThrow(UsageError);
    }
    expect(() => parseDuration('soon', '--older-than')).toThrow(/--older-than must be a duration/);
  });

  it('reads ISO instants; no offset means UTC', () => {
    expect(parseInstant('2026-11-30', '--to').toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(parseInstant('2026-11-30T06:00', '--to').toISOString()).toBe('2026-11-30T06:00:00.000Z');
    expect(parseInstant('2026-11-30T06:00:00.123Z', '--to').toISOString()).toBe('2026-11-30T06:00:00.123Z');
    expect(parseInstant('2026-11-30T09:30:00+03:30', '--to').toISOString()).toBe('2026-11-30T06:00:00.000Z');
  });

  it('refuses impossible or ambiguous instants', () => {
    for (const text of ['2026-02-30', '2026-11-30 06:00', '30/11/2026', '2026-11-30T25:00', 'yesterday', '2026-11-30T06:00+0330']) {
      expect(() => parseInstant(text, '--to'), text).toThrow(UsageError);
    }
  });

  it('--since takes an instant or a duration ago', () => {
    const now = Date.parse('2026-11-30T12:00:00Z');
    expect(parseSince('24h', '--since', now).toISOString()).toBe('2026-11-29T12:00:00.000Z');
    expect(parseSince('2026-11-01', '--since', now).toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });
});

describe('instantText', () => {
  it('shows an instant as ISO 8601, nothing as -, and one beyond JavaScript dates without throwing', () => {
    // Prepare: how node-postgres hands over a timestamptz of 2^53 - 1 ms (year 287396)
    const beyond = new Date('+287396-10-12T08:59:00.991Z');

    // Act / Assess
    expect(Number.isNaN(beyond.getTime())).toBe(true);
    expect(instantText(new Date('2026-11-30T06:00:00.123Z'))).toBe('2026-11-30T06:00:00.123Z');
    expect(instantText(null)).toBe('-');
    expect(instantText(beyond)).toBe('after the year 275760 (beyond JavaScript dates)');
  });
});

describe('output', () => {
  it('pads columns, aligns numbers right, shows absent values as -', () => {
    const text = renderTable(
      [
        { header: 'NAME', value: (row: { name: string; lag: bigint | null }) => row.name },
        { header: 'LAG', value: (row) => row.lag, align: 'right' },
      ],
      [
        { name: 'reviews', lag: 12345n },
        { name: 'app-stats', lag: null },
      ],
    );
    expect(text).toBe('NAME         LAG\nreviews    12345\napp-stats      -\n');
  });

  it('says (none) under the header of an empty table', () => {
    expect(renderTable([{ header: 'ID', value: (row: { id: string }) => row.id }], [])).toBe('ID\n(none)\n');
  });

  it('writes bigints as strings in JSON', () => {
    expect(JSON.parse(renderJson({ offset: 9007199254740993n }))).toEqual({ offset: '9007199254740993' });
  });
});

describe('the command line', () => {
  it('prints the usage with exit 0 on --help, and exit 2 without a command or with an unknown one', async () => {
    const help = await cli('--help');
    const none = await cli();
    const unknown = await cli('frobnicate');

    expect(help.code).toBe(0);
    for (const command of COMMANDS) expect(help.stdout).toContain(`  ${command.name} `);
    expect(help.stdout).toContain('Exit codes: 0 ok; 1');
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage: storage-consumer <command>');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
  });

  it('prints its version with --version (the package.json version)', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    const run = await cli('--version');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`storage-consumer ${version}\n`);
  });

  it('has --help on every command and dlq subcommand', async () => {
    const names = [...COMMANDS.map((command) => [command.name]), ['dlq', 'list'], ['dlq', 'show'], ['dlq', 'redrive'], ['dlq', 'purge']];
    for (const name of names) {
      const run = await cli(...name, '--help');
      expect(run.code, name.join(' ')).toBe(0);
      expect(run.stdout, name.join(' ')).toContain(`Usage: storage-consumer ${name.join(' ')}`);
    }
  });

  it('turns a wrong command line into exit 2 naming the (sub)command, before any service is contacted', async () => {
    const cases: string[][] = [
      ['verify', '--max-lag', 'lots'],
      ['verify', '--stage', 'moon'],
      ['replay', 'reviews', '--to', 'earliest', '--stage', 'moon'],
      ['peek', 'reviews', '--partition', '0'],
      ['peek', 'reviews', '--partition', '0', '--offset', '1', '--count', '0'],
      ['audit', '--since', 'yesterday'],
      ['dlq', 'purge', '--older-than', '30d', '--expect', '1:xyz', '--yes'],
      ['verify', '--stage', 'dev', '--max-lag', '3'],
      ['verify', 'extra'],
      ['lag', '--pipeline', 'comments'],
      ['replay'],
      ['replay', 'reviews'],
      ['replay', 'reviews', '--to', 'tomorrow'],
      ['dlq'],
      ['dlq', 'frobnicate'],
      ['dlq', 'list', '--limit', '0'],
      ['dlq', 'list', '--pipeline', 'comments'],
      ['dlq', 'show', '12a'],
      ['dlq', 'purge'],
      ['dlq', 'purge', '--older-than', 'a while'],
      ['healthcheck', '--max-age', 'forever'],
      ['migrate', '--force'],
    ];
    for (const argv of cases) {
      const run = await cli(...argv);
      expect(run.code, argv.join(' ')).toBe(2);
    }
    const sub = await cli('dlq', 'purge', '--older-than', 'a while');
    expect(sub.stderr).toContain('storage-consumer dlq purge: --older-than must be a duration');
    expect(sub.stderr).toContain('Run storage-consumer dlq purge --help for usage.');
  });

  it('exits 1 with the message when a setting is invalid', async () => {
    let stderr = '';
    const code = await main(['lag'], { stdout: () => undefined, stderr: (text) => void (stderr += text), env: {} });
    expect(code).toBe(1);
    expect(stderr).toContain('KAFKA_BROKERS is required');
  });
});
