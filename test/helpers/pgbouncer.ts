import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Where the Debian package `pgbouncer` installs the binary (not on an ordinary user's PATH). */
const DEBIAN_PATHS = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];

/** The PgBouncer binary (found through `PATH`, then the Debian path), or `undefined` when absent. */
export function pgbouncerBinary(): string | undefined {
  const onPath = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((folder) => folder !== '')
    .map((folder) => join(folder, 'pgbouncer'));
  return [...onPath, ...DEBIAN_PATHS].find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return statSync(candidate).isFile();
    } catch {
      return false;
    }
  });
}

/** The one line a run without PgBouncer prints, naming the package to install. */
export const PGBOUNCER_MISSING =
  'pgbouncer not found (PATH, /usr/sbin/pgbouncer): the connection-pooler tests are skipped; install the Debian package "pgbouncer" to run them';

/** A PgBouncer this test run started; `stop()` ends it (and only it). */
export interface RunningPgBouncer {
  readonly port: number;
  /** PgBouncer's own log so far, for a failing test's message. */
  readonly log: () => string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}:\n${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(100);
  }
  throw new Error(`pgbouncer did not listen on ${port} within 15 s:\n${log()}`);
}

/**
 * Starts PgBouncer in front of `server` (a PostgreSQL URL) in TRANSACTION pooling mode with its
 * stock settings otherwise (no `ignore_startup_parameters`), on a free port, with its config
 * in a temporary folder. `databases` maps each name clients connect to onto the server's
 * database, with an optional query PgBouncer runs on every new server connection (a test
 * schema's `search_path`: clients may not send `options` through PgBouncer 1.18).
 * PgBouncer refuses to run as root; as root it runs as user `postgres`.
 */
export async function startPgBouncer(
  server: string,
  databases: Readonly<Record<string, { readonly connectQuery?: string }>>,
): Promise<RunningPgBouncer> {
  const binary = pgbouncerBinary();
  if (!binary)
    throw new Error('pgbouncer is not installed (PATH, /usr/sbin/pgbouncer): install the Debian package "pgbouncer" (.ci/run installs it)');
  const target = new URL(server);
  const user = decodeURIComponent(target.username) || 'postgres';
  const database = decodeURIComponent(target.pathname.slice(1));
  const port = await freePort();
  const folder = await mkdtemp(join(tmpdir(), 'pgbouncer-'));
  // The folder must be readable by user postgres.
  await chmod(folder, 0o755);
  const entries = Object.entries(databases).map(([name, { connectQuery }]) => {
    const query = connectQuery ? ` connect_query='${connectQuery.replace(/'/g, "''")}'` : '';
    return `${name} = host=${target.hostname} port=${target.port || 5432} dbname=${database}${query}`;
  });
  const config = [
    '[databases]',
    ...entries,
    '',
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'pool_mode = transaction',
    // The machine's PostgreSQL trusts local connections; PgBouncer still wants the user listed.
    'auth_type = trust',
    // The admin console (`SHOW SERVERS`) tells which server backends PgBouncer holds.
    `admin_users = ${user}`,
    `auth_file = ${join(folder, 'userlist.txt')}`,
    'max_client_conn = 100',
    'default_pool_size = 4',
    '',
  ].join('\n');
  await writeFile(join(folder, 'pgbouncer.ini'), config, { mode: 0o644 });
  // Clients are trusted; PgBouncer logs in to a server that checks passwords (the embedded one)
  // with the user's password from this list.
  const password = decodeURIComponent(target.password).replace(/"/g, '""');
  await writeFile(join(folder, 'userlist.txt'), `"${user}" "${password}"\n`, { mode: 0o644 });

  const asRoot = process.getuid?.() === 0;
  // setpriv execs PgBouncer itself, so the child's pid is PgBouncer's and a signal reaches it.
  const [command, args] = asRoot
    ? ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', binary, join(folder, 'pgbouncer.ini')]]
    : [binary, [join(folder, 'pgbouncer.ini')]];
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const log = () => output;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
    await rm(folder, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, child, log);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, log, stop };
}
