/**
 * The chaos run's own servers: a Kafka broker and an embedded PostgreSQL, each on its own port
 * and data folder (never the ones other tests or the machine use), each restartable in place.
 * A restart is a crash: SIGKILL of the broker's JVM, an immediate shutdown (SIGQUIT) of the
 * PostgreSQL postmaster, so that the restart has to recover from its logs.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { freePorts } from '../dev/free-ports.js';
import { startBroker } from '../dev/kafka/broker.js';
import type { StartedBroker } from '../dev/kafka/broker.js';
import { startEmbeddedPostgres } from '../dev/embedded-postgres.js';
import type { EmbeddedDatabase } from '../dev/embedded-postgres.js';
import { runMigrations } from '../shared/migrations/run.js';
import { REFUSED_MARKERS } from './plan.js';
import type { Workload } from './plan.js';

/** A broker the run owns. */
export interface ChaosBroker {
  readonly brokers: string[];
  /** Kills the JVM (SIGKILL) and starts it again on the same port and data folder. */
  crashAndRestart(): Promise<{ downMs: number }>;
  stop(): Promise<void>;
}

/** Starts the run's broker in `dataDir` on fixed ports, so that a restart keeps its address. */
export async function startChaosBroker(dataDir: string, log: (line: string) => void): Promise<ChaosBroker> {
  const [port, controllerPort] = await freePorts(2);
  const options = { port, controllerPort, dataDir, stopTimeoutMs: 20_000, log };
  let current: StartedBroker = await startBroker(options);
  return {
    brokers: current.brokers,
    async crashAndRestart() {
      const began = Date.now();
      process.kill(current.pid, 'SIGKILL');
      // Waits for the JVM to be gone, dismisses its guardian and removes the pid file.
      await current.stop();
      current = await startBroker(options);
      return { downMs: Date.now() - began };
    },
    stop: () => current.stop(),
  };
}

/** A PostgreSQL server the run owns. */
export interface ChaosDatabase {
  readonly url: string;
  /** Immediate shutdown (SIGQUIT to the postmaster: no checkpoint) and a start with crash recovery. */
  crashAndRestart(): Promise<{ downMs: number }>;
  stop(): Promise<void>;
}

/** Starts the run's embedded PostgreSQL in `dataDir` on a free port. */
export async function startChaosDatabase(dataDir: string): Promise<ChaosDatabase> {
  const [port] = await freePorts(1);
  const options = { dataDir, port: port as number, persistent: true };
  const postmasterPid = async () => Number.parseInt((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0] ?? '', 10);
  const start = () => startEmbeddedPostgres(options);
  let current: EmbeddedDatabase = await start();
  return {
    url: current.url,
    async crashAndRestart() {
      const began = Date.now();
      const pid = await postmasterPid();
      process.kill(pid, 'SIGQUIT');
      // stop() waits for the postmaster's exit (its SIGINT finds it already going).
      await current.stop();
      current = await start();
      return { downMs: Date.now() - began };
    },
    stop: () => current.stop(),
  };
}

/**
 * Prepares the run's database: the App API stand-in with the workload's apps, the migrations, and
 * the CHECK constraints behind the `rejected_by_database` poison.
 */
export async function prepareChaosDatabase(url: string, workload: Workload): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await pool.query(await readFile(new URL('../dev/app-api-stand-in.sql', import.meta.url), 'utf8'));
    for (const app of workload.apps) {
      await pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, $3)', [
        app.id,
        app.packageName,
        app.active,
      ]);
    }
    await runMigrations({ connection: { connectionString: url }, logger: { info: () => undefined, warn: () => undefined } });
    // Rules the database has and the decoder does not know: rows carrying these values are
    // refused (SQLSTATE 23514) and must be isolated and dead-lettered, not stall the partition.
    for (const [table, marker] of Object.entries(REFUSED_MARKERS)) {
      await pool.query(
        `ALTER TABLE ${table} ADD CONSTRAINT chaos_refused_marker CHECK (${marker.column} IS DISTINCT FROM '${marker.value}')`,
      );
    }
  } finally {
    await pool.end();
  }
}
