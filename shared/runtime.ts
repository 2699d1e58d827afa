import type pg from 'pg';
import { createPool } from './db.js';
import type { CoreLogger } from './logger.js';
import type { AnyPipelineSpec } from './pipelines.js';
import { PIPELINES } from './pipelines.js';
import type { PipelineName } from './pipelines.js';
import { ApplicationResolver } from './resolver.js';
import { PrecheckSwitch } from './upsert.js';
import type { DatabaseSettings, Settings } from './settings.js';

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
): PipelineRuntime & { close(): Promise<void>; warm(): Promise<void> } {
  let pool: Promise<pg.Pool> | undefined;
  const open = () => {
    if (!pool) {
      const opening = source.settings().then((database) => createPool(database, logger, name));
      pool = opening;
      // A failed fetch (e.g. Secrets Manager briefly unavailable) must not be cached for good.
      opening.catch(() => {
        if (pool === opening) pool = undefined;
      });
    }
    return pool;
  };
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
  };
}
