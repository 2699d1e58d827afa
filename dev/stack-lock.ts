/**
 * One `npm start` per clone: the dev stack (the broker in `.data/kafka`, the embedded PostgreSQL
 * in `.data/postgres`) belongs to the `npm start` that holds `.data/npm-start.json`. A second one
 * is refused, naming the holder, its addresses and how to stop it, instead of failing later on a
 * locked data folder or, with the banner's addresses exported, running a second host on the
 * first one's stack. A lock left by a process that is gone (or whose pid now runs something else)
 * is taken over.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { commandLine, isAlive } from './kafka/process.js';

/** What the lock file says about its holder. */
interface Holder {
  readonly pid: number;
  /** ISO time the holder started. */
  readonly since: string;
  /** What the holder's stack is doing, in words (`starting`, `running`, `kept after a failed pipeline ...`). */
  readonly state: string;
  readonly kafka?: string;
  readonly postgres?: string;
}

/** The lock of this process. */
export interface StackLock {
  /** Records what the holder is doing and where its stack answers, for a refused second start. */
  update(change: Partial<Omit<Holder, 'pid' | 'since'>>): Promise<void>;
  release(): Promise<void>;
}

/** A live `npm start` holds this clone's dev stack. */
class StackHeldError extends Error {
  override readonly name = 'StackHeldError';
  constructor(holder: Holder) {
    const where = [holder.kafka && `Kafka ${holder.kafka}`, holder.postgres && `PostgreSQL ${holder.postgres}`].filter(Boolean).join(', ');
    super(
      `another npm start holds this clone's dev stack: pid ${holder.pid}, since ${holder.since}, ${holder.state}` +
        `${where === '' ? '' : ` (${where})`}. Use that one, or stop it first: Ctrl-C in its terminal, or kill ${holder.pid}.`,
    );
  }
}

const LOCK_FILE = 'npm-start.json';
/** What the holder's command line contains (a pid reused by another program is no holder). */
const HOLDER_MARK = 'scripts/start.ts';

async function liveHolder(file: string): Promise<Holder | undefined> {
  let holder: Holder;
  try {
    holder = JSON.parse(await readFile(file, 'utf8')) as Holder;
  } catch {
    return undefined;
  }
  if (!Number.isInteger(holder.pid) || holder.pid === process.pid || !(await isAlive(holder.pid))) return undefined;
  const args = await commandLine(holder.pid);
  return args === undefined || args.some((arg) => arg.includes(HOLDER_MARK)) ? holder : undefined;
}

/** Takes the lock in `dataRoot` (the clone's `.data`), or throws {@link StackHeldError}. */
export async function lockStack(dataRoot: string): Promise<StackLock> {
  const file = path.join(dataRoot, LOCK_FILE);
  let holder: Holder = { pid: process.pid, since: new Date().toISOString(), state: 'starting' };
  await mkdir(dataRoot, { recursive: true });
  for (let attempt = 0; ; attempt += 1) {
    try {
      await writeFile(file, `${JSON.stringify(holder)}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const other = await liveHolder(file);
      if (other !== undefined) throw new StackHeldError(other);
      if (attempt > 0) throw error;
      await rm(file, { force: true });
    }
  }
  return {
    async update(change) {
      holder = { ...holder, ...change };
      await writeFile(file, `${JSON.stringify(holder)}\n`);
    },
    async release() {
      const current = await readFile(file, 'utf8').catch(() => '');
      if (current.includes(`"pid":${process.pid},`)) await rm(file, { force: true });
    },
  };
}
