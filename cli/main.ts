import { pathToFileURL } from 'node:url';
import { ConfigurationError, MigrationError } from '../shared/errors.js';
import { redactConnectionDetails } from '../shared/redaction.js';
import { SERVICE_VERSION } from '../shared/version.js';
import type { CliIo, Command } from './command.js';
import { EXIT, RefusedError, UsageError } from './command.js';
import { audit } from './commands/audit.js';
import { config } from './commands/config.js';
import { dlq } from './commands/dlq.js';
import { healthcheck } from './commands/healthcheck.js';
import { lag } from './commands/lag.js';
import { migrate } from './commands/migrate.js';
import { pause, resume } from './commands/pause.js';
import { peek } from './commands/peek.js';
import { replay } from './commands/replay.js';
import { run } from './commands/run.js';
import { status } from './commands/status.js';
import { verify } from './commands/verify.js';

/** Every command, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  run,
  migrate,
  healthcheck,
  config,
  verify,
  status,
  lag,
  pause,
  resume,
  replay,
  peek,
  dlq,
  audit,
];

/** The top-level `--help`. */
const USAGE = `Usage: storage-consumer <command> [options]
       storage-consumer --version

Commands:
${COMMANDS.map((command) => `  ${command.name.padEnd(13)}${command.summary}`).join('\n')}

Run storage-consumer <command> --help for a command's options. Settings come from the same
environment variables as the host (DATABASE_URL or PG*, KAFKA_BROKERS, STORAGE_*: docs/settings.md);
storage-consumer config prints them.

Exit codes: 0 ok; 1 a check failed, the operation was refused or an error occurred; 2 usage error
(config: an invalid setting).
`;

/** The process's streams and environment. */
const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  env: process.env,
  interactive: process.stderr.isTTY === true,
};

/**
 * Runs one command line (`argv` without the program name) and resolves with its exit code:
 * 0 ok, 1 check failed / refused / error, 2 usage error. Never throws.
 */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    io.stderr(USAGE);
    return EXIT.usage;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.stdout(USAGE);
    return EXIT.ok;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    io.stdout(`storage-consumer ${SERVICE_VERSION}\n`);
    return EXIT.ok;
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (command === undefined) {
    io.stderr(`storage-consumer: unknown command ${JSON.stringify(name)}\n\n${USAGE}`);
    return EXIT.usage;
  }
  try {
    return await command.run(args, io);
  } catch (error) {
    if (error instanceof UsageError) {
      const usage = error.command ?? name;
      io.stderr(`storage-consumer ${usage}: ${error.message}\nRun storage-consumer ${usage} --help for usage.\n`);
      return EXIT.usage;
    }
    const known = error instanceof RefusedError || error instanceof ConfigurationError || error instanceof MigrationError;
    const message = error instanceof Error ? error.message : String(error);
    const cause =
      error instanceof Error && error.cause instanceof Error && !message.includes(error.cause.message) ? ` (${error.cause.message})` : '';
    // The one redaction: a driver's message may carry a connection string with its password.
    io.stderr(`storage-consumer ${name}: ${known ? '' : 'error: '}${redactConnectionDetails(`${message}${cause}`)}\n`);
    return EXIT.failed;
  }
}

/** Writes everything still buffered, so exiting right after loses no output. */
function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()));
}

/**
 * The program: runs `argv` and exits the process with the command's code once its output is
 * written (a client library's lingering timer must not keep a finished command alive).
 */
export async function runCli(argv: readonly string[] = process.argv.slice(2)): Promise<never> {
  const code = await main(argv);
  await Promise.all([flush(process.stdout), flush(process.stderr)]);
  process.exit(code);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await runCli();
}
