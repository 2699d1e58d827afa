import type { Environment } from '../shared/env.js';
import { StorageConsumerError } from '../shared/errors.js';

/**
 * Exit codes scripts can trust, with what each means: docs/operations.md holds the one table of
 * them (a unit test keeps the two in step) and the top-level `--help` prints it.
 */
export const EXIT_CODES = [
  { code: 0, name: 'ok', meaning: 'done; every check held' },
  {
    code: 1,
    name: 'failed',
    meaning: 'a check failed, the operation was refused, a setting is invalid (but see config), or an error occurred',
  },
  {
    code: 2,
    name: 'usage',
    meaning: 'usage error: unknown command or option, a missing or malformed argument; `config`: an invalid setting',
  },
] as const;

/** The exit codes by name: everything held / a check failed or the operation was refused / bad usage. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const satisfies Record<(typeof EXIT_CODES)[number]['name'], number>;

/** Where a command writes and what it reads; the process's own streams and environment by default. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Environment;
  /** stderr is a terminal: long commands show their progress there. */
  readonly interactive?: boolean;
  /**
   * How the operator started the CLI (`npx storage-consumer`, cli/invocation.ts): the start of
   * every command printed for them to paste. `storage-consumer` when not given.
   */
  readonly invokedAs?: string;
}

/** One option of a command: `--name` (boolean) or `--name <value>` (string). */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  /** The value's placeholder in the help (`N` shows `--limit <N>`); string options only. */
  readonly value?: string;
  /** One line for the help: what it does, its default. */
  readonly help: string;
  /** A string option that may be given more than once (`--pipeline a --pipeline b`): the command gets every value, in order. */
  readonly repeatable?: boolean;
}

/** A command's options by their long name (`'older-than'` is `--older-than`). */
export type Options = Readonly<Record<string, OptionSpec>>;

/**
 * The values of `O` as the command receives them: a string option is its text (the last one
 * given when repeated; every one, in order, for a `repeatable` option), a boolean one is `true`
 * when given (`--no-x` included), else absent.
 */
export type OptionValues<O extends Options> = {
  -readonly [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : O[K] extends { readonly repeatable: true } ? string[] : string;
};

/** A positional argument, always required: `<name>` in the usage. */
export interface ArgumentSpec {
  readonly name: string;
  readonly help: string;
}

/** What a command's `run` receives: its options and its positional arguments, parsed. */
export interface ParsedArgs<O extends Options> {
  readonly values: OptionValues<O>;
  readonly positionals: readonly string[];
}

/** One `storage-consumer <command>` (or `dlq <command>`), declared once: the parser and the help come from it. */
export interface LeafCommand<O extends Options = Options> {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** The prose of its `--help`, between the usage and the options. */
  readonly description: string;
  /** Usage lines after `storage-consumer <name> `, only where the command has alternative forms; generated otherwise. */
  readonly usage?: readonly string[];
  readonly arguments?: readonly ArgumentSpec[];
  readonly options: O;
  run(args: ParsedArgs<O>, io: CliIo): Promise<number>;
}

/** A command that only holds subcommands (`dlq list|show|redrive|purge`). */
export interface GroupCommand {
  readonly name: string;
  readonly summary: string;
  readonly subcommands: readonly Command[];
}

export type Command = LeafCommand | GroupCommand;

/**
 * Declares a command; the identity, for the option types: `run` sees `values` typed by `options`.
 * @example defineCommand({ name: 'lag', summary: '...', description: '...', options: { ...PIPELINE_OPTION }, run: ... })
 */
export function defineCommand<O extends Options>(command: LeafCommand<O>): LeafCommand<O> {
  return command;
}

/** The command line itself is wrong (a malformed or missing value): exit 2 with the command's usage. */
export class UsageError extends StorageConsumerError {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The operation was refused or a check failed for a reason the operator must act on: exit 1. */
export class RefusedError extends StorageConsumerError {
  constructor(message: string) {
    super(message);
    this.name = 'RefusedError';
  }
}

/** `--json`, which every command but `run` takes; `help` says what the JSON holds. */
export function jsonOption(help = 'the same as JSON'): { readonly json: { readonly type: 'boolean'; readonly help: string } } {
  return { json: { type: 'boolean', help } };
}
