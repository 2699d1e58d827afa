/**
 * How the operator started this command line, so that a command it prints for them to run next
 * (`dlq purge`'s exact delete) can be pasted into the same shell: `npx storage-consumer`,
 * `storage-consumer` when that is on the PATH, else `node <the path they ran>`.
 */
import { basename, delimiter, dirname, isAbsolute, relative, resolve } from 'node:path';
import type { Environment } from '../shared/env.js';

const PROGRAM = 'storage-consumer';

/** A word the shell takes as it is, else in single quotes. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The command that starts this CLI again, as the operator started it: `npx storage-consumer`
 * under npx (`npm exec`, which sets `npm_command=exec`); `storage-consumer` when the script run is
 * a `storage-consumer` in a folder of the PATH (a global install, a linked package); otherwise
 * `node` and the script's path, relative to the working folder when it lies below it
 * (`node bin/storage-consumer.js`, the container's `node bin/storage-consumer.js`).
 */
export function invocationOf(env: Environment, script: string | undefined, cwd: string = process.cwd()): string {
  if (env.npm_command === 'exec') return `npx ${PROGRAM}`;
  if (script === undefined || script === '') return `npx ${PROGRAM}`;
  const path = resolve(cwd, script);
  const onPath = (env.PATH ?? '')
    .split(delimiter)
    .filter((folder) => folder !== '')
    .some((folder) => resolve(cwd, folder) === dirname(path));
  if (basename(path) === PROGRAM && onPath) return PROGRAM;
  const below = relative(cwd, path);
  return `node ${shellWord(below !== '' && !below.startsWith('..') && !isAbsolute(below) ? below : path)}`;
}
