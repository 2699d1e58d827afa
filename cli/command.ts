import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import type { Environment } from '../shared/env.js';
import { StorageConsumerError } from '../shared/errors.js';

/** Exit codes scripts can trust: everything held / a check failed or the operation was refused / bad usage. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** Where a command writes and what it reads; the process's own streams and environment by default. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Environment;
  /** stderr is a terminal: long commands show their progress there. */
  readonly interactive?: boolean;
}

/** One `storage-consumer <command>`. */
export interface Command {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** The full `--help` text. */
  readonly help: string;
  run(args: readonly string[], io: CliIo): Promise<number>;
}

/** The command line itself is wrong (unknown option, missing argument): exit 2 with the usage. */
export class UsageError extends StorageConsumerError {
  /** @param command the (sub)command whose usage was wrong, e.g. `dlq list`; the dispatcher fills it in. */
  constructor(
    message: string,
    readonly command?: string,
  ) {
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

type Options = Readonly<Record<string, { readonly type: 'string' | 'boolean'; readonly multiple?: boolean; readonly short?: string }>>;

/** The values `parseArgs` returns for `O`: every option optional, typed by its `type`. */
export type OptionValues<O extends Options> = {
  -readonly [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : O[K]['multiple'] extends true ? string[] : string;
};

/**
 * `util.parseArgs` in strict mode, with `--help` on every command; a parse problem becomes a
 * UsageError. Returns `undefined` when help was asked for (and printed).
 */
export function parseCommandArgs<O extends Options>(
  command: Pick<Command, 'help'>,
  args: readonly string[],
  io: CliIo,
  options: O,
  positionals: { min: number; max: number } = { min: 0, max: 0 },
): { values: OptionValues<O>; positionals: string[] } | undefined {
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...args],
      options: { ...options, help: { type: 'boolean', short: 'h' } } as Options as NonNullable<ParseArgsConfig['options']>,
      allowPositionals: positionals.max > 0,
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (parsed.values.help === true) {
    io.stdout(command.help);
    return undefined;
  }
  const count = parsed.positionals.length;
  if (count < positionals.min) throw new UsageError('missing argument');
  if (count > positionals.max) throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positionals.max])}`);
  return { values: parsed.values as OptionValues<O>, positionals: parsed.positionals };
}

/** `--json` is common to most commands. */
export const JSON_OPTION = { json: { type: 'boolean' } } as const;
