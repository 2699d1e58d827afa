import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMMANDS, main } from '../../../cli/main.js';
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
