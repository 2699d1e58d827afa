/**
 * The `pipeline_pauses` table: reading the pauses, and a pause or resume written with its audit
 * entry in one transaction, and the change's JSON.
 */
import type pg from 'pg';
import { beginBatchTransaction } from './connection.js';
import { recordInTransaction } from './operator-actions.js';
import type { AuditPolicy, AuditRecord } from './operator-actions.js';
import { isPipelineName } from './pipelines.js';
import type { PipelineName } from './pipelines.js';
import type { Queryable } from './queryable.js';
import type { DatabaseSettings } from './settings.js';

/**
 * The pause state of the pipelines (`pipeline_pauses`, migration 0006): one row per pipeline that
 * was ever paused, no row = running. Every host reads it every few seconds and pauses or resumes
 * its own consumers to match, so a pause taken anywhere (the CLI, any host's HTTP endpoint)
 * holds for every instance, and across restarts. The Lambda functions never read it.
 */

/** One pipeline's pause row. */
export interface PipelinePause {
  readonly pipeline: PipelineName;
  readonly paused: boolean;
  /** Who paused or resumed it last. */
  readonly by: string;
  readonly at: Date;
  readonly reason: string | null;
}

/** How a pause or resume reached the table: the CLI, or a host's HTTP endpoint. */
export type PauseChannel = 'cli' | 'http';

/** A pause or a resume to write. */
export interface PauseChange {
  readonly pipeline: PipelineName;
  readonly paused: boolean;
  /** The actor (`user@host`, `STORAGE_ACTOR`, or the HTTP caller). */
  readonly by: string;
  readonly reason?: string | undefined;
  readonly via: PauseChannel;
  /** Extra audit arguments (e.g. the host that took an HTTP request). */
  readonly details?: Readonly<Record<string, unknown>>;
  /** `required` (the default, and always over HTTP): no audit entry, no change. `waived`: `--no-audit`. */
  readonly audit?: AuditPolicy;
}

/** What a change did: the row now, and the one before (`undefined`: never paused before). */
export interface PauseChangeResult {
  readonly pause: PipelinePause;
  readonly previous: PipelinePause | undefined;
  /** The audit entry written with the change, or why none was (only when the record was waived). */
  readonly audit: AuditRecord;
}

/**
 * A pause or resume as JSON (an interface: `pause --json`, `resume --json` and the host's
 * `PUT /pipelines/{pipeline}/pause|resume` answer it): the row now, and whether it was paused before.
 */
export function pauseChangeJson({ pause, previous }: PauseChangeResult) {
  return {
    pipeline: pause.pipeline,
    paused: pause.paused,
    was_paused: previous?.paused ?? false,
    by: pause.by,
    at: pause.at.toISOString(),
    reason: pause.reason,
  };
}

interface PauseRow {
  pipeline: string;
  paused: boolean;
  by: string;
  at: Date;
  reason: string | null;
}

function toPause(row: PauseRow): PipelinePause | undefined {
  if (!isPipelineName(row.pipeline)) return undefined;
  return { pipeline: row.pipeline, paused: row.paused, by: row.by, at: row.at, reason: row.reason };
}

const SELECT_PAUSES = 'SELECT pipeline, paused, by, at, reason FROM pipeline_pauses';

/**
 * Every pipeline's pause row, keyed by pipeline. One plain statement, no session state: safe
 * through PgBouncer in transaction mode and RDS Proxy.
 */
export async function readPipelinePauses(client: Queryable): Promise<Map<PipelineName, PipelinePause>> {
  const { rows } = await client.query<PauseRow>(SELECT_PAUSES);
  const pauses = new Map<PipelineName, PipelinePause>();
  for (const row of rows) {
    const pause = toPause(row);
    if (pause) pauses.set(pause.pipeline, pause);
  }
  return pauses;
}

/**
 * Pauses or resumes a pipeline for every host: writes its row and the audit entry
 * (`operator_actions`, command `pause` or `resume`) in one transaction, under the service's
 * statement timeout. Pausing a paused pipeline (or resuming a running one) is no error: the row
 * takes the new actor and reason and the audit entry says it was already so.
 * @throws AuditUnavailableError when the entry cannot be written (unless `change.audit` waives
 *   it): the transaction is rolled back, nothing changed.
 */
export async function changePipelinePause(pool: pg.Pool, database: DatabaseSettings, change: PauseChange): Promise<PauseChangeResult> {
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    await beginBatchTransaction(client, database);
    const before = await client.query<PauseRow>(`${SELECT_PAUSES} WHERE pipeline = $1 FOR UPDATE`, [change.pipeline]);
    const previous = before.rows[0] ? toPause(before.rows[0]) : undefined;
    const written = await client.query<PauseRow>(
      `INSERT INTO pipeline_pauses (pipeline, paused, by, at, reason) VALUES ($1, $2, $3, now(), $4)
       ON CONFLICT (pipeline) DO UPDATE SET paused = EXCLUDED.paused, by = EXCLUDED.by, at = EXCLUDED.at, reason = EXCLUDED.reason
       RETURNING pipeline, paused, by, at, reason`,
      [change.pipeline, change.paused, change.by, change.reason ?? null],
    );
    const pause = written.rows[0] ? toPause(written.rows[0]) : undefined;
    if (pause === undefined) throw new Error(`writing the pause row of ${change.pipeline} returned nothing`);
    const audit = await recordInTransaction(
      client,
      {
        actor: change.by,
        command: change.paused ? 'pause' : 'resume',
        arguments: { pipeline: change.pipeline, reason: change.reason ?? null, via: change.via, ...change.details },
        outcome: { paused: pause.paused, was_paused: previous?.paused ?? false, at: pause.at.toISOString() },
      },
      change.audit ?? 'required',
    );
    await client.query('COMMIT');
    return { pause, previous, audit };
  } catch (error) {
    failed = error instanceof Error ? error : new Error(String(error));
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(failed);
  }
}
