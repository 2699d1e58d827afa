import { pathToFileURL } from 'node:url';
import { Command as Commander, CommanderError, Option } from 'commander';
import { ConfigurationError, MigrationError } from '../shared/errors.js';
import { redactConnectionDetails } from '../shared/redaction.js';
import { SERVICE_VERSION } from '../shared/version.js';
import type { CliIo, Command, LeafCommand, Options, OptionValues } from './command.js';
import { EXIT, EXIT_CODES, RefusedError, UsageError } from './command.js';
import { invocationOf } from './invocation.js';
import { errorText, renderJson } from './output.js';

/**
 * Every command's module by the command's name, in the order `--help` lists them. A command's
 * module (and the clients it needs: kafkajs, pg, the AWS SDK) is loaded only when that command
 * runs, or for the whole help: `--version` and `healthcheck` (the container's HEALTHCHECK,
 * every 15 s) load nothing else.
 */
const COMMAND_MODULES = {
  run: async () => (await import('./commands/run.js')).run,
  migrate: async () => (await import('./commands/migrate.js')).migrate,
  healthcheck: async () => (await import('./commands/healthcheck.js')).healthcheck,
  config: async () => (await import('./commands/config.js')).config,
  verify: async () => (await import('./commands/verify.js')).verify,
  reconcile: async () => (await import('./commands/reconcile.js')).reconcile,
  status: async () => (await import('./commands/status.js')).status,
  lag: async () => (await import('./commands/lag.js')).lag,
  pause: async () => (await import('./commands/pause.js')).pause,
  resume: async () => (await import('./commands/pause.js')).resume,
  replay: async () => (await import('./commands/replay.js')).replay,
  peek: async () => (await import('./commands/peek.js')).peek,
  dlq: async () => (await import('./commands/dlq.js')).dlq,
  audit: async () => (await import('./commands/audit.js')).audit,
} as const satisfies Record<string, () => Promise<Command>>;

type CommandName = keyof typeof COMMAND_MODULES;

const isCommandName = (word: string | undefined): word is CommandName => word !== undefined && Object.hasOwn(COMMAND_MODULES, word);

/** The declared commands, `names` or all of them, in the order `--help` lists them. */
export async function loadCommands(names: readonly CommandName[] = Object.keys(COMMAND_MODULES) as CommandName[]): Promise<Command[]> {
  return Promise.all(names.map((name) => COMMAND_MODULES[name]()));
}

/**
 * The commands a command line needs: the one it names; none for the version; all of them
 * otherwise (the top-level help lists them, a mistyped command is matched against them).
 */
function commandsNeededBy(argv: readonly string[]): CommandName[] | undefined {
  const first = argv[0];
  if (isCommandName(first)) return [first];
  if (argv.length === 1 && (first === '--version' || first === '-V' || first === 'version')) return [];
  return undefined;
}

const PROGRAM = 'storage-consumer';
/** Help is laid out for this width whatever the terminal, so it reads the same in a pipe, a log or a test. */
const HELP_WIDTH = 100;

/** The text after the top-level `--help`'s command list. */
const EPILOGUE = `
Run ${PROGRAM} <command> --help for a command's options. Settings come from the same
environment variables as the host (DATABASE_URL or PG*, KAFKA_BROKERS, STORAGE_*: docs/settings.md);
${PROGRAM} config prints them.

Exit codes (docs/operations.md, "Exit codes"):
${EXIT_CODES.map(({ code, meaning }) => `  ${code}  ${meaning.replaceAll('`', '')}`).join('\n')}`;

/** The process's streams and environment. */
const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  env: process.env,
  interactive: process.stderr.isTTY === true,
  invokedAs: invocationOf(process.env, process.argv[1]),
};

/** `storage-consumer dlq list`: the words that name a command, as usage lines and messages show them. */
function commandPath(command: Commander): string {
  const names: string[] = [];
  for (let at: Commander | null = command; at !== null; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** The usage after the command's name, from its declaration: `<id> [--pipeline <P>] [--json]`. */
function generatedUsage(command: LeafCommand): string {
  const args = (command.arguments ?? []).map((argument) => `<${argument.name}>`);
  const options = Object.entries(command.options).map(([name, option]) =>
    option.type === 'string' ? `[--${name} <${option.value ?? 'value'}>]${option.repeatable === true ? '...' : ''}` : `[--${name}]`,
  );
  return [...args, ...options].join(' ');
}

/** The usage forms of each leaf command; set as its usage once its path (`dlq purge`) is known. */
const USAGE_FORMS = new WeakMap<Commander, readonly string[]>();

/** The usage error commander reported (its text without the usage lines) and the command it was for. */
interface UsageFailure {
  message?: string;
  path?: string;
}

/** Where a leaf command's run leaves its exit code for `main`. */
interface Outcome {
  code: number;
  /** The command that ran (`storage-consumer dlq purge`): its errors are prefixed with it. */
  path: string;
}

/** The commander command of one declared leaf command; its action runs the command and records the code. */
function leafCommand(declared: LeafCommand, io: CliIo, outcome: Outcome): Commander {
  const command = new Commander(declared.name).summary(declared.summary).description(declared.description);
  for (const argument of declared.arguments ?? []) command.argument(`<${argument.name}>`, argument.help);
  for (const [name, option] of Object.entries(declared.options)) {
    const added = new Option(option.type === 'string' ? `--${name} <${option.value ?? 'value'}>` : `--${name}`, option.help);
    if (option.repeatable === true) added.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
    command.addOption(added);
  }
  USAGE_FORMS.set(command, declared.usage ?? [generatedUsage(declared)]);
  command.action(async () => {
    const values: Record<string, string | boolean | string[]> = {};
    for (const option of command.options) {
      const name = option.long?.slice(2) ?? '';
      const value: unknown = command.getOptionValue(option.attributeName());
      // A flag is true when it was given (`--no-audit` reads as `'no-audit': true`: commander counts a
      // negated flag as no boolean, and keeps it as `audit: false`); a string is its text.
      if (option.isBoolean() || option.negate) {
        if (command.getOptionValueSource(option.attributeName()) === 'cli') values[name] = true;
      } else if (typeof value === 'string' || Array.isArray(value)) {
        values[name] = value as string | string[];
      }
    }
    outcome.path = commandPath(command);
    try {
      outcome.code = await declared.run({ values: values as OptionValues<Options>, positionals: [...command.args] }, io);
    } catch (error) {
      if (error instanceof UsageError) command.error(error.message, { exitCode: EXIT.usage, code: 'storage-consumer.usage' });
      throw error;
    }
  });
  return command;
}

function commandFor(declared: Command, io: CliIo, outcome: Outcome): Commander {
  if (!('subcommands' in declared)) return leafCommand(declared, io, outcome);
  const group = new Commander(declared.name).summary(declared.summary).description(declared.summary);
  for (const sub of declared.subcommands) group.addCommand(commandFor(sub, io, outcome));
  return group;
}

/**
 * The whole command line as commander commands, built per run (its output goes to `io`). Every
 * command gets the same treatment: errors on `io.stderr` prefixed with its path, then its usage
 * (a group: its whole help), and an exception instead of `process.exit` so `main` returns the code.
 */
function buildProgram(commands: readonly Command[], io: CliIo, outcome: Outcome, usageFailure: UsageFailure): Commander {
  const program = new Commander(PROGRAM)
    .description('The operations command line of the Storage Consumer (Kafka -> PostgreSQL).')
    .version(`${PROGRAM} ${SERVICE_VERSION}`, '-V, --version', 'print the version')
    .addHelpText('after', EPILOGUE);
  for (const declared of commands) program.addCommand(commandFor(declared, io, outcome));
  program
    .command('version', { hidden: true })
    .description('print the version')
    .action(() => io.stdout(`${PROGRAM} ${SERVICE_VERSION}\n`));
  const configure = (command: Commander) => {
    const path = commandPath(command);
    const isGroup = command.commands.length > 0;
    const forms = USAGE_FORMS.get(command) ?? ['<command> [options]'];
    // The first form follows "Usage: "; the others get a line of their own.
    const usage = forms.map((form, index) => `${index === 0 ? '' : '       '}${path} ${form}`.trimEnd()).join('\n');
    command
      .exitOverride()
      .allowExcessArguments(false)
      .configureHelp({
        helpWidth: HELP_WIDTH,
        commandUsage: () => usage,
        // The command list shows each command with its arguments; its options are in its own help.
        subcommandTerm: (sub) =>
          [
            sub.name(),
            ...sub.registeredArguments.map((argument) => (argument.required ? `<${argument.name()}>` : `[${argument.name()}]`)),
          ].join(' '),
      })
      .configureOutput({
        writeOut: io.stdout,
        writeErr: io.stderr,
        outputError: (text, write) => {
          const message = text.replace(/^error: /, '');
          usageFailure.message = message.trimEnd();
          usageFailure.path = path;
          write(`${path}: ${message}`);
        },
      })
      .showSuggestionAfterError(true)
      .showHelpAfterError(isGroup ? true : `Usage: ${usage}\nRun ${path} --help for usage.`);
    for (const sub of command.commands) configure(sub);
  };
  configure(program);
  return program;
}

/** `--json` among the options (before a `--`): the caller parses stdout, so errors answer JSON there too. */
function asksForJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/** What went wrong, for scripts: `usage` (exit 2), `refused`, `configuration`, `migration` or `error` (exit 1). */
export type CliErrorKind = 'usage' | 'refused' | 'configuration' | 'migration' | 'error';

/**
 * The JSON answer of a `--json` command that failed with an error instead of its own report
 * (docs/operations.md, "Exit codes"): `{ error: { kind, message, command }, exitCode }` on stdout,
 * beside the text line on stderr. The message is the stderr line's, redacted the same way.
 */
function errorAnswer(kind: CliErrorKind, message: string, command: string, exitCode: number): string {
  return renderJson({ error: { kind, message, command }, exitCode });
}

function errorKind(error: unknown): CliErrorKind {
  if (error instanceof RefusedError) return 'refused';
  if (error instanceof ConfigurationError) return 'configuration';
  if (error instanceof MigrationError) return 'migration';
  return 'error';
}

/**
 * Runs one command line (`argv` without the program name) and resolves with its exit code:
 * 0 ok, 1 check failed / refused / error, 2 usage error. Never throws. With `--json`, an error
 * also answers JSON on stdout ({@link errorAnswer}).
 */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const outcome: Outcome = { code: EXIT.ok, path: PROGRAM };
  const usageFailure: UsageFailure = {};
  const json = asksForJson(argv);
  // A command that already answered its own JSON document (replay's refused plan) keeps it as the
  // one document on stdout: a second, the error object, would make stdout unparseable.
  let answered = false;
  const commandIo: CliIo = {
    ...io,
    stdout: (text: string) => {
      if (text.length > 0) answered = true;
      io.stdout(text);
    },
  };
  const program = buildProgram(await loadCommands(commandsNeededBy(argv)), commandIo, outcome, usageFailure);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return outcome.code;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help, --version and `help`: 0; a group named without its subcommand prints its help with a non-zero code.
      const asked = ['commander.helpDisplayed', 'commander.version'].includes(error.code);
      if (asked || (error.code === 'commander.help' && error.exitCode === 0)) return EXIT.ok;
      if (json) {
        const message = usageFailure.message ?? 'a command is required: run it with --help for the list';
        io.stdout(errorAnswer('usage', redactConnectionDetails(message), usageFailure.path ?? outcome.path, EXIT.usage));
      }
      return EXIT.usage;
    }
    const known = error instanceof RefusedError || error instanceof ConfigurationError || error instanceof MigrationError;
    // The one redaction: a driver's message may carry a connection string with its password.
    const message = errorText(error, { withCause: true });
    io.stderr(`${outcome.path}: ${known ? '' : 'error: '}${message}\n`);
    if (json && !answered) io.stdout(errorAnswer(errorKind(error), message, outcome.path, EXIT.failed));
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
