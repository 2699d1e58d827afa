import type { CliIo, Command } from '../command.js';
import { EXIT, UsageError } from '../command.js';
import { dlqList } from './dlq-list.js';
import { dlqPurge } from './dlq-purge.js';
import { dlqRedrive } from './dlq-redrive.js';
import { dlqShow } from './dlq-show.js';

const SUBCOMMANDS: readonly Command[] = [dlqList, dlqShow, dlqRedrive, dlqPurge];

/** `dlq <list|show|redrive|purge>`: the dead-letter table. */
export const dlq: Command = {
  name: 'dlq',
  summary: 'dead letters: list, show, redrive, purge',
  help: `Usage: storage-consumer dlq <command> [options]

${SUBCOMMANDS.map((command) => `  ${command.name.padEnd(9)}${command.summary}`).join('\n')}

Run storage-consumer dlq <command> --help for its options.
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const [name, ...rest] = args;
    if (name === undefined) {
      io.stderr(dlq.help);
      return EXIT.usage;
    }
    if (name === '--help' || name === '-h') {
      io.stdout(dlq.help);
      return EXIT.ok;
    }
    const command = SUBCOMMANDS.find((candidate) => candidate.name === name);
    if (command === undefined) throw new UsageError(`unknown dlq command ${JSON.stringify(name)}`);
    try {
      return await command.run(rest, io);
    } catch (error) {
      throw error instanceof UsageError && error.command === undefined ? new UsageError(error.message, `dlq ${name}`) : error;
    }
  },
};
