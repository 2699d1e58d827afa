/**
 * Every command of `storage-consumer` (as its own `--help` lists them) is named in README's
 * operations list and has a row in the command table of docs/operations.md: a command nobody can
 * find in the docs is a command nobody runs when it would help.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}${path}`, 'utf8');

/** The command names of a `--help` output's "Commands:" list (`help` itself left out). */
async function commandsOf(args: string[]): Promise<string[]> {
  let printed = '';
  const io = { stdout: (text: string) => void (printed += text), stderr: () => undefined, env: {}, interactive: false };
  await main([...args, '--help'], io);
  const list = printed.split('Commands:\n')[1] ?? '';
  const names: string[] = [];
  for (const line of list.split('\n')) {
    if (line.trim() === '') break;
    const name = /^ {2}([a-z][a-z-]*)/.exec(line)?.[1];
    if (name !== undefined && name !== 'help') names.push(name);
  }
  return names;
}

describe('the CLI commands in the docs', () => {
  it("README's operations list and docs/operations.md's table name every command", async () => {
    const commands = await commandsOf([]);
    expect(commands).toEqual(expect.arrayContaining(['run', 'migrate', 'verify', 'peek', 'audit', 'dlq']));
    const readme = read('README.md');
    const operations = readme.slice(readme.indexOf('## Operations'), readme.indexOf('\n## ', readme.indexOf('## Operations') + 1));
    // The first cell of each row of the table: `pause <pipeline> [--reason TEXT]`, `resume <pipeline>`.
    const table = read('docs/operations.md')
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .flatMap((line) => [...(line.split(' | ')[0] ?? '').matchAll(/`([a-z-]+(?: [a-z-]+)?)/g)].map((match) => match[1] ?? ''));
    const missing: string[] = [];
    for (const command of commands) {
      const subcommands = await commandsOf([command]);
      if (subcommands.length === 0) {
        if (!operations.includes(`\`${command}\``)) missing.push(`README.md, Operations: \`${command}\``);
        if (!table.some((row) => row === command || row.startsWith(`${command} `)))
          missing.push(`docs/operations.md, the command table: ${command}`);
        continue;
      }
      // A group: README names it as `dlq list|show|redrive|purge`, the table has a row per subcommand.
      const listed = new RegExp(`\`${command} ([a-z|-]+)\``).exec(operations)?.[1]?.split('|') ?? [];
      for (const sub of subcommands) {
        if (!listed.includes(sub)) missing.push(`README.md, Operations: \`${command} ${sub}\``);
        if (!table.includes(`${command} ${sub}`)) missing.push(`docs/operations.md, the command table: ${command} ${sub}`);
      }
    }
    expect(missing, 'commands the docs do not list').toEqual([]);
  });
});
