/**
 * The host's side of pause and resume: reads `pipeline_pauses` at start and every poll interval,
 * applies it to the consumers, and writes the HTTP API's changes.
 */
import type pg from 'pg';
import { createPool } from '../shared/db.js';
import type { CoreLogger } from '../shared/logger.js';
import type { PipelineName } from '../shared/pipelines.js';
import { changePipelinePause, readPipelinePauses } from '../shared/pause-store.js';
import { redactConnectionDetails } from '../shared/redaction.js';
import type { PauseChange, PauseChangeResult, PipelinePause } from '../shared/pause-store.js';
import type { HostSettings } from '../config/host-settings.js';

/** While the pause table cannot be read, the WARN repeats at most this often. */
const READ_FAILURE_WARN_EVERY_MS = 60_000;

/** What the host knows of the shared pause state. */
export interface PauseView {
  /** The pause row this host obeys for `pipeline`, `undefined` = running. */
  pauseOf(pipeline: PipelineName): PipelinePause | undefined;
  /** When the table was last read successfully, and the last read's error (`undefined` after a success). */
  readState(): { readonly readAt: Date | undefined; readonly error: string | undefined };
}

/** The host's side of pause and resume: polls `pipeline_pauses`, applies it, writes HTTP changes. */
export interface PauseControl extends PauseView {
  /** Reads the table once and applies it; never throws (a failed read keeps the last state). */
  refresh(): Promise<void>;
  /** Starts reading every `STORAGE_PAUSE_POLL_INTERVAL_MS`. */
  start(): void;
  /** Writes a pause or resume (with its audit entry), then applies it in this host at once. */
  change(change: PauseChange): Promise<PauseChangeResult>;
  /** Stops polling and closes the pool. */
  close(): Promise<void>;
}

/** What a pause control is built from. */
export interface PauseControlOptions {
  readonly settings: HostSettings;
  readonly logger: CoreLogger;
  /** Called for each of the host's pipelines whose pause changed (and once for each at the first read). */
  readonly apply: (pipeline: PipelineName, pause: PipelinePause | undefined) => void;
  /** Told each failed read (the host's progress records say why a pipeline still waits for its first read). */
  readonly onReadFailed?: (error: unknown) => void;
  /** Test seam: the pool to read and write through; default one connection of its own. */
  readonly pool?: pg.Pool;
}

/**
 * Keeps the host's pipelines in line with `pipeline_pauses`: one connection of its own (never
 * a pipeline's), one plain SELECT every poll interval (no LISTEN/NOTIFY: a transaction-pooling
 * pooler cannot carry it). A read that fails keeps the last known state and warns (once, then at
 * most once a minute while it lasts): a pause already obeyed stays obeyed, and a database that is
 * down stores no batch anyway. Before the first read succeeded there is no known state: each
 * pipeline is held (fetches nothing) until it is, and the warning says so.
 */
export function createPauseControl(options: PauseControlOptions): PauseControl {
  const { settings, logger, apply } = options;
  const pipelines = settings.storage.selectedPipelines;
  const pool = options.pool ?? createPool(settings.storage.database, logger, 'pause-control', { max: 1 });
  const current = new Map<PipelineName, PipelinePause>();
  let applied = false;
  let readAt: Date | undefined;
  let error: string | undefined;
  let warnedAt = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let reading: Promise<void> | undefined;

  const take = (pauses: ReadonlyMap<PipelineName, PipelinePause>) => {
    for (const name of pipelines) {
      const row = pauses.get(name);
      const next = row?.paused ? row : undefined;
      const before = current.get(name);
      if (next) current.set(name, next);
      else current.delete(name);
      if (!applied || (before === undefined) !== (next === undefined)) apply(name, next);
    }
    applied = true;
  };

  const read = async () => {
    try {
      const pauses = await readPipelinePauses(pool);
      if (closed) return;
      if (error !== undefined) logger.info('pause state readable again', { table: 'pipeline_pauses' });
      error = undefined;
      readAt = new Date();
      take(pauses);
    } catch (caught) {
      error = caught instanceof Error ? caught.message || caught.name : String(caught);
      options.onReadFailed?.(caught);
      if (performance.now() - warnedAt >= READ_FAILURE_WARN_EVERY_MS) {
        warnedAt = performance.now();
        if (applied)
          logger.warn('cannot read the pause state; each pipeline keeps its last known pause state', {
            table: 'pipeline_pauses',
            error: redactConnectionDetails(error),
            paused: [...current.keys()],
          });
        else
          logger.warn('cannot read the pause state; no pipeline fetches until it is read once', {
            table: 'pipeline_pauses',
            error: redactConnectionDetails(error),
            waiting: [...pipelines],
          });
      }
    }
  };

  const refresh = () => {
    reading ??= read().finally(() => (reading = undefined));
    return reading;
  };

  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      void refresh().then(schedule);
    }, settings.pausePollIntervalMs);
    timer.unref();
  };

  return {
    pauseOf: (pipeline) => current.get(pipeline),
    readState: () => ({ readAt, error }),
    refresh,
    start() {
      if (timer === undefined) schedule();
    },
    async change(change) {
      const result = await changePipelinePause(pool, settings.storage.database, change);
      // A poll under way may hold the row from before: this host applies the new one now.
      await reading;
      await refresh();
      return result;
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await reading;
      if (options.pool === undefined) await pool.end().catch(() => undefined);
    },
  };
}
