/**
 * One pipeline's runtime: its settings, logger, database pool and resolver cache, built once per
 * Lambda container or host pipeline, and the ping the host's readiness uses.
 */
import pg from 'pg';
import { connectionConfig, createPool } from './db.js';
import type { CoreLogger } from './logger.js';
import type { AnyPipelineSpec } from './pipelines.js';
import { PIPELINES } from './pipelines.js';
import type { PipelineName } from './pipelines.js';
import { ApplicationResolver } from './resolver.js';
import { PrecheckSwitch } from './upsert.js';
import { TIMED_OUT, within } from './timeout.js';
import type { DatabaseSettings, Settings } from './settings.js';

/**
 * How long a readiness ping waits for one of the pool's connections before it asks the database
 * from outside the pool what holds them (well inside the readiness check's 3 s).
 */
const PING_CONNECTION_WAIT_MS = 1_000;

/** What one pipeline keeps between batches: its pool and its cache (nothing shared). */
export interface PipelineRuntime {
  readonly definition: AnyPipelineSpec;
  readonly settings: Settings;
  readonly logger: CoreLogger;
  readonly pool: () => Promise<pg.Pool>;
  readonly resolver: ApplicationResolver;
  /** Whether the upsert filters stale rows first: learnt from the pipeline's last batch. */
  readonly precheck: PrecheckSwitch;
  /** Re-reads rotated database credentials (AWS); absent locally. */
  readonly refreshCredentials?: () => Promise<void>;
}

/** Where a pipeline's connection settings come from: the settings, or e.g. a secret (AWS). */
export interface DatabaseSource {
  /**
   * Connection settings; fetched once, cached by the source. `signal` bounds a fetch (the
   * migration's deadline): an aborted fetch rejects with the signal's reason and is not cached.
   */
  readonly settings: (options?: { readonly signal?: AbortSignal }) => Promise<DatabaseSettings>;
  /** Forgets cached credentials so the next `settings()` re-reads them (after a rotation). */
  readonly refresh?: () => Promise<void>;
}

/**
 * Builds one pipeline's runtime: its own lazily created pool (re-created after a credential
 * refresh) and its own application cache. Nothing is shared between pipelines.
 */
export function createPipelineRuntime(
  name: PipelineName,
  settings: Settings,
  logger: CoreLogger,
  source: DatabaseSource = { settings: async () => settings.database },
): PipelineRuntime & { close(): Promise<void>; warm(): Promise<void>; ping(): Promise<PingResult> } {
  let pool: Promise<pg.Pool> | undefined;
  const open = () => {
    if (!pool) {
      const opening = source.settings().then((database) => trackBackends(createPool(database, logger, name)));
      pool = opening;
      // A failed fetch (e.g. Secrets Manager briefly unavailable) must not be cached for good.
      opening.catch(() => {
        if (pool === opening) pool = undefined;
      });
    }
    return pool;
  };
  /** A ping's request for a connection is still queued in the pool. */
  let pingWaiting = false;
  const close = async () => {
    const current = pool;
    pool = undefined;
    if (current) await (await current).end();
  };
  return {
    definition: PIPELINES[name],
    settings,
    logger,
    pool: open,
    resolver: new ApplicationResolver(settings.applicationCacheTtlMs),
    precheck: new PrecheckSwitch(),
    refreshCredentials: source.refresh
      ? async () => {
          await source.refresh?.();
          await close();
        }
      : undefined,
    close,
    // Opens the pool's first connection ahead of the first batch, so a latency-sensitive
    // pipeline does not pay connection set-up on its first message.
    warm: async () => {
      await (await open()).query('SELECT 1');
    },
    // A pool whose every connection is checked out for a moment (a batch writing) is busy, not
    // held: the ping queues for a connection like any statement and says "held" only when none
    // comes within PING_CONNECTION_WAIT_MS.
    ping: async () => {
      const current = await open();
      // An earlier ping still waits for a connection: the pool is still held, and a probe every
      // few seconds must not pile requests up in front of the batch's own statements.
      if (pingWaiting) return { poolHeld: await askOutsidePool(await source.settings(), current, name) };
      pingWaiting = true;
      const pending = current.connect();
      const settled = () => {
        pingWaiting = false;
      };
      pending.then(settled, settled);
      const client = await within(pending, PING_CONNECTION_WAIT_MS);
      if (client === TIMED_OUT) {
        // The connection comes when a statement of the batch ends: given back at once.
        pending.then(
          (late) => late.release(),
          () => undefined,
        );
        return { poolHeld: await askOutsidePool(await source.settings(), current, name) };
      }
      try {
        await client.query('SELECT 1');
        client.release();
      } catch (error) {
        client.release(error instanceof Error ? error : true);
        throw error;
      }
      return { poolHeld: undefined };
    },
  };
}

/**
 * What a readiness ping found: the database answers; `poolHeld` when no connection of the pool came
 * free within PING_CONNECTION_WAIT_MS.
 */
export interface PingResult {
  readonly poolHeld: { readonly size: number; readonly waiting: number; readonly waits: readonly string[] } | undefined;
}

/** The server process ids of each pool's connections, for asking what exactly they wait on. */
const backends = new WeakMap<pg.Pool, Set<number>>();

/**
 * Follows the pool's connections' server pids (node-postgres' `processID`, from the server's
 * BackendKeyData): the held-pool answer names what this pool's statements wait on, not those of
 * another host or pipeline that shares the application name (a second host of the pipeline, or
 * a staging deployment on the same server).
 */
function trackBackends(pool: pg.Pool): pg.Pool {
  const pids = new Set<number>();
  backends.set(pool, pids);
  const pidOf = (client: pg.PoolClient) => (client as unknown as { processID?: number | null }).processID;
  pool.on('connect', (client) => {
    const pid = pidOf(client);
    if (typeof pid === 'number') pids.add(pid);
  });
  pool.on('remove', (client) => {
    const pid = pidOf(client);
    if (typeof pid === 'number') pids.delete(pid);
  });
  return pool;
}

/**
 * Every connection of the pool stayed busy (a batch blocked on a lock holds them): waiting longer
 * would say "the database does not answer" when it does. A connection of its own asks the
 * database instead, and what the pool's sessions wait on (`pg_stat_activity`, by the pool's
 * application name): `Lock/relation, blocked by pid 4711`.
 */
async function askOutsidePool(database: DatabaseSettings, pool: pg.Pool, name: string): Promise<NonNullable<PingResult['poolHeld']>> {
  const client = new pg.Client({ ...connectionConfig(database), query_timeout: database.connectTimeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ wait: string | null; blockers: number[] | null; seconds: number | null }>(
      `SELECT wait_event_type || '/' || wait_event AS wait, pg_blocking_pids(pid) AS blockers,
              round(extract(epoch FROM now() - query_start))::int AS seconds
         FROM pg_stat_activity
        WHERE application_name = $1 AND state = 'active' AND pid <> pg_backend_pid() AND pid = ANY($2::int[])`,
      [`storage-consumer/${name}`, [...(backends.get(pool) ?? [])]],
    );
    const waits = rows.map((row) => {
      const blockers = row.blockers === null || row.blockers.length === 0 ? '' : `, blocked by pid ${row.blockers.join(', ')}`;
      return `a statement running for ${row.seconds ?? '?'} s waits on ${row.wait ?? 'nothing (running)'}${blockers}`;
    });
    // The ping's own request for a connection is one of the waiting ones.
    return { size: pool.totalCount, waiting: Math.max(0, pool.waitingCount - 1), waits };
  } finally {
    await client.end().catch(() => undefined);
  }
}
