import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES } from '../../../cli/command.js';
import type { Command, LeafCommand } from '../../../cli/command.js';
import { loadCommands, main } from '../../../cli/main.js';
import { SilentEndpoint } from '../../helpers/silent-endpoint.js';
const COMMANDS = await loadCommands();

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

describe('the command line', () => {
  it('prints the usage with exit 0 on --help, and exit 2 without a command or with an unknown one', async () => {
    const help = await cli('--help');
    const none = await cli();
    const unknown = await cli('frobnicate');

    expect(help.code).toBe(0);
    for (const command of COMMANDS) expect(help.stdout).toContain(`  ${command.name} `);
    for (const { code, meaning } of EXIT_CODES) expect(help.stdout).toContain(`  ${code}  ${meaning.replaceAll('`', '')}\n`);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage: storage-consumer <command>');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
  });

  it('answers a mistyped command or option with exit 2, a suggestion and the usage', async () => {
    const command = await cli('stauts');
    const sub = await cli('dlq', 'lsit');
    const option = await cli('dlq', 'list', '--jsn');
    const shared = await cli('replay', 'reviews', '--stgae', 'dev');

    expect(command.code).toBe(2);
    expect(command.stderr).toContain("storage-consumer: unknown command 'stauts'\n(Did you mean status?)");
    expect(command.stderr).toContain('Usage: storage-consumer <command> [options]');
    expect(sub.code).toBe(2);
    expect(sub.stderr).toContain("storage-consumer dlq: unknown command 'lsit'\n(Did you mean list?)");
    expect(sub.stderr).toContain('Usage: storage-consumer dlq <command> [options]');
    expect(option.code).toBe(2);
    expect(option.stderr).toBe(
      "storage-consumer dlq list: unknown option '--jsn'\n(Did you mean --json?)\n" +
        'Usage: storage-consumer dlq list [--pipeline <P>] [--reason <R>] [--since <T>] [--pending] [--limit <N>] [--json]\n' +
        'Run storage-consumer dlq list --help for usage.\n',
    );
    expect(shared.code).toBe(2);
    expect(shared.stderr).toContain('(Did you mean --stage?)');
    for (const run of [command, sub, option, shared]) expect(run.stdout).toBe('');
  });

  it('takes --option value and --option=value, negative numbers as values, and the last of a repeated option', async () => {
    const spaced = await cli('dlq', 'list', '--limit', '0');
    const joined = await cli('dlq', 'list', '--limit=0');
    const negative = await cli('dlq', 'list', '--limit', '-5');
    const repeated = await cli('dlq', 'list', '--limit', '5', '--limit', '0');
    const negativeId = await cli('dlq', 'show', '-5');

    for (const run of [spaced, joined, repeated]) {
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('--limit must be a positive whole number, got 0');
    }
    expect(negative.code).toBe(2);
    expect(negative.stderr).toContain('--limit must be a positive whole number, got -5');
    expect(negativeId.code).toBe(2);
    expect(negativeId.stderr).toContain(`<id> must be a dead letter's numeric id, got "-5"`);
    // Past the parser: the last --limit (5) was taken, and the unreachable database answers (exit 1).
    const valid = await cli('dlq', 'list', '--limit', '0', '--limit', '5');
    expect(valid.code).toBe(1);
    expect(valid.stderr).toMatch(/^storage-consumer dlq list: error: /);
  });

  it('lists every declared option and argument in the help, and --json on every command but run', async () => {
    const leaves = (command: Command, path: string[]): Array<[string[], LeafCommand]> =>
      'subcommands' in command ? command.subcommands.flatMap((sub) => leaves(sub, [...path, sub.name])) : [[path, command]];
    for (const [path, command] of COMMANDS.flatMap((command) => leaves(command, [command.name]))) {
      const help = (await cli(...path, '--help')).stdout;
      for (const name of Object.keys(command.options)) expect(help, path.join(' ')).toMatch(new RegExp(`\\n  --${name}\\b`));
      for (const argument of command.arguments ?? []) expect(help, path.join(' ')).toContain(`<${argument.name}>`);
      if (command.name !== 'run') expect(Object.keys(command.options), path.join(' ')).toContain('json');
    }
    const run = await cli('run', '--json');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("unknown option '--json'");
  });

  it('answers JSON on stdout for a usage error of every --json command, beside the text on stderr', async () => {
    const leaves = (command: Command, path: string[]): Array<[string[], LeafCommand]> =>
      'subcommands' in command ? command.subcommands.flatMap((sub) => leaves(sub, [...path, sub.name])) : [[path, command]];
    const answered: string[] = [];
    for (const [path] of COMMANDS.flatMap((command) => leaves(command, [command.name])).filter(([, command]) => command.name !== 'run')) {
      // Act: an option no command has
      const run = await cli(...path, '--json', '--frobnicate');

      // Assess
      const name = path.join(' ');
      expect(run.code, name).toBe(2);
      expect(run.stderr, name).toContain("unknown option '--frobnicate'");
      expect(JSON.parse(run.stdout), name).toEqual({
        error: { kind: 'usage', message: "unknown option '--frobnicate'", command: `storage-consumer ${name}` },
        exitCode: 2,
      });
      answered.push(name);
    }
    expect(answered).toContain('dlq purge');
    // A malformed value, a missing argument, a group without its command, and run (which refuses --json itself).
    const malformed = await cli('dlq', 'list', '--limit', '0', '--json');
    const missing = await cli('dlq', 'show', '--json');
    const group = await cli('dlq', '--json');
    const run = await cli('run', '--json');
    expect(JSON.parse(malformed.stdout)).toEqual({
      error: { kind: 'usage', message: '--limit must be a positive whole number, got 0', command: 'storage-consumer dlq list' },
      exitCode: 2,
    });
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: { kind: 'usage', message: "missing required argument 'id'" }, exitCode: 2 });
    expect(JSON.parse(group.stdout)).toMatchObject({ error: { kind: 'usage', command: 'storage-consumer dlq' }, exitCode: 2 });
    expect(JSON.parse(run.stdout)).toMatchObject({ error: { kind: 'usage', command: 'storage-consumer run' }, exitCode: 2 });
    // Without --json, stdout stays empty.
    expect((await cli('dlq', 'list', '--limit', '0')).stdout).toBe('');
  });

  it('answers JSON for an error that ends a --json command: a missing setting, an unreachable database (redacted)', async () => {
    // Act
    let stdout = '';
    let stderr = '';
    const code = await main(['lag', '--json'], {
      stdout: (text) => void (stdout += text),
      stderr: (text) => void (stderr += text),
      env: {},
    });
    const unreachable = await cli('dlq', 'list', '--json');

    // Assess
    expect(code).toBe(1);
    expect(stderr).toBe('storage-consumer lag: KAFKA_BROKERS is required but not set\n');
    expect(JSON.parse(stdout)).toEqual({
      error: { kind: 'configuration', message: 'KAFKA_BROKERS is required but not set', command: 'storage-consumer lag' },
      exitCode: 1,
    });
    expect(unreachable.code).toBe(1);
    const refused = 'connecting to PostgreSQL at <address> failed: connect ECONNREFUSED <address>';
    expect(unreachable.stderr).toBe(`storage-consumer dlq list: error: ${refused}\n`);
    expect(JSON.parse(unreachable.stdout)).toEqual({
      error: { kind: 'error', message: refused, command: 'storage-consumer dlq list' },
      exitCode: 1,
    });
  });

  it('answers JSON from every --json command when it cannot reach its services (no broker set, the database refusing)', async () => {
    // Prepare: valid arguments for every command that takes --json
    const argumentsOf: Record<string, readonly string[]> = {
      migrate: [],
      healthcheck: ['--pid', '1'],
      config: [],
      verify: [],
      status: [],
      lag: [],
      pause: ['reviews'],
      resume: ['reviews'],
      replay: ['reviews', '--to', 'earliest'],
      peek: ['reviews', '--partition', '0', '--offset', '0'],
      'dlq list': [],
      'dlq show': ['1'],
      'dlq redrive': [],
      'dlq purge': ['--older-than', '30d'],
      audit: [],
      reconcile: ['--pipeline', 'reviews'],
    };
    const leaves = (command: Command, path: string[]): Array<[string[], LeafCommand]> =>
      'subcommands' in command ? command.subcommands.flatMap((sub) => leaves(sub, [...path, sub.name])) : [[path, command]];
    const jsonCommands = COMMANDS.flatMap((command) => leaves(command, [command.name]))
      .filter(([, command]) => 'json' in command.options)
      .map(([path]) => path.join(' '));
    expect(jsonCommands.sort()).toEqual(Object.keys(argumentsOf).sort());
    const answers: Record<string, unknown> = {};
    for (const name of jsonCommands) {
      // Act
      let stdout = '';
      let stderr = '';
      const code = await main([...name.split(' '), ...(argumentsOf[name] ?? []), '--json'], {
        stdout: (text) => void (stdout += text),
        stderr: (text) => void (stderr += text),
        env: { DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none' },
      });

      // Assess: one JSON document on stdout, whatever failed; an error answer carries the exit code
      const answer = JSON.parse(stdout) as { error?: { kind: string; message: string; command: string }; exitCode?: number };
      answers[name] = answer.error === undefined ? 'its own report' : answer.error.kind;
      expect(code, name).not.toBe(0);
      // No password anywhere; in an error, no address or user either (config shows the settings, with the password masked).
      expect(stdout + stderr, name).not.toContain('secret');
      if (answer.error !== undefined) {
        expect(stdout + stderr, name).not.toMatch(/127\.0\.0\.1|nobody/);
        expect(answer.exitCode, name).toBe(code);
        expect(answer.error.command, name).toBe(`storage-consumer ${name}`);
        expect(stderr, name).toContain(answer.error.message);
      }
    }
    expect(answers).toEqual({
      migrate: 'error',
      healthcheck: 'its own report',
      config: 'its own report',
      verify: 'configuration',
      status: 'configuration',
      lag: 'configuration',
      pause: 'error',
      resume: 'error',
      replay: 'configuration',
      peek: 'configuration',
      'dlq list': 'error',
      'dlq show': 'error',
      'dlq redrive': 'error',
      'dlq purge': 'error',
      audit: 'error',
      reconcile: 'configuration',
    });
  });

  it('names the step, the (redacted) address and the connect timeout when the database accepts and never answers', async () => {
    // Prepare
    const endpoint = new SilentEndpoint();
    const port = new URL(await endpoint.start()).port;
    try {
      // Act
      let stderr = '';
      const code = await main(['dlq', 'list'], {
        stdout: () => undefined,
        stderr: (text) => void (stderr += text),
        env: { DATABASE_URL: `postgres://nobody:secret@127.0.0.1:${port}/none`, STORAGE_DB_CONNECT_TIMEOUT_MS: '500' },
      });

      // Assess
      expect(code).toBe(1);
      expect(stderr).toBe(
        'storage-consumer dlq list: error: connecting to PostgreSQL at <address> failed: Connection terminated due to connection timeout ' +
          '(no answer within STORAGE_DB_CONNECT_TIMEOUT_MS=500 ms)\n',
      );
    } finally {
      await endpoint.stop();
    }
  });

  it('documents the exit codes in one table, the one the help prints', () => {
    const operations = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
    const section = operations.split(/^## /m).find((part) => part.startsWith('Exit codes\n')) ?? '';
    const rows = new Map([...section.matchAll(/^\| `?(\d+)`? \| (.+) \|$/gm)].map((match) => [Number(match[1]), match[2] ?? ''] as const));
    for (const { code, meaning } of EXIT_CODES) expect(rows.get(code), `exit code ${code}`).toContain(meaning);
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
      ['dlq', 'show', '1', '2'],
      ['pause'],
      ['run', 'now'],
      [],
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
