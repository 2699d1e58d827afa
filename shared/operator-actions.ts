/**
 * The audit trail (`operator_actions`, migrations 0005 and 0007): every operator action that
 * changes state leaves one entry saying when, who, what and with what outcome, written BEFORE
 * the change takes effect: in the change's own transaction (purge, re-drive, pause, resume), or
 * first as `started` with the plan and completed after (replay, whose change lives in Kafka).
 * No entry, no action: an action whose entry cannot be written is refused, unless the operator
 * waived the record (`--no-audit`, CLI only). Both the CLI and the host (HTTP pause / resume)
 * write through this module, so the entries look alike.
 */
import { hostname, userInfo } from 'node:os';
import type { Environment } from './env.js';
import { isTransientError } from './error-classification.js';
import { StorageConsumerError } from './errors.js';
import { redactConnectionDetails } from './redaction.js';
import type { Queryable } from './queryable.js';
import { loadSetting } from './setting.js';
import { STORAGE_ACTOR } from './setting-declarations.js';

/** `started`: the plan is recorded, the end is not (yet); `failed`: the change did not happen, or only in part. */
export type OperatorActionState = 'started' | 'completed' | 'failed';

/**
 * Whether an action needs its entry: `required` (no entry, no action) or `waived` (the operator
 * accepted an unrecorded change with `--no-audit`; the command says so when it is unrecorded).
 */
export type AuditPolicy = 'required' | 'waived';

/** The entry an action wrote, or why it wrote none (only under the `waived` policy). */
export type AuditRecord =
  { readonly id: string; readonly unrecorded?: undefined } | { readonly id?: undefined; readonly unrecorded: string };

/**
 * The audit entry could not be written (the table is missing, locked past the timeout, not
 * writable by this role, or the database is unreachable): the action was not taken.
 */
export class AuditUnavailableError extends StorageConsumerError {
  constructor(
    /** Why, from the database's answer (e.g. `permission denied for table operator_actions`). */
    readonly reason: string,
    /** The SQLSTATE or system code, when there is one: what an HTTP answer may show. */
    readonly code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(`the audit entry could not be written to operator_actions: ${reason}`, options);
    this.name = 'AuditUnavailableError';
  }
}

/** `error` as an {@link AuditUnavailableError} (kept when it already is one). */
export function auditUnavailable(error: unknown): AuditUnavailableError {
  if (error instanceof AuditUnavailableError) return error;
  const shape = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown };
  // The one redaction: the reason is shown to operators (stderr, --json), never an address or a user.
  const message = redactConnectionDetails(error instanceof Error ? error.message : String(error));
  const code = typeof shape.code === 'string' ? shape.code : undefined;
  return new AuditUnavailableError(message || (code ?? 'unknown error'), code, { cause: error });
}

/** Offsets of one partition before and after an action, as `outcome.partitions` holds them. */
export interface PartitionOffsetChange {
  readonly topic?: string;
  readonly partition: number;
  /** The committed offset before the action (`null`: none committed). Offsets are strings. */
  readonly before: string | null;
  readonly after: string | null;
}

/** Offsets an action passed without storing them: `[from, to)` on one partition. */
export interface SkippedRange {
  readonly topic?: string;
  readonly partition: number;
  readonly from: string;
  readonly to: string;
  readonly count: string;
}

/**
 * The outcome of an action. Free-form JSON, with these conventional keys where they apply:
 * `counts` (e.g. `{deleted: 3}`), `partitions` (offsets before and after), `skipped` (ranges
 * passed without being stored), `error` (an action that failed half-way).
 */
export interface OperatorActionOutcome {
  readonly counts?: Readonly<Record<string, number>>;
  readonly partitions?: readonly PartitionOffsetChange[];
  readonly skipped?: readonly SkippedRange[];
  readonly [key: string]: unknown;
}

/** One entry to write. */
export interface OperatorAction {
  /** From {@link resolveActor}. */
  readonly actor: string;
  /** The command as an operator types it: `dlq purge`, `dlq redrive`, `replay`, `pause`, `resume`. */
  readonly command: string;
  /** The arguments that decided what the action did (pipeline, filters, cut-off, flags). */
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly outcome: OperatorActionOutcome;
}

/** One stored entry. */
export interface OperatorActionEntry extends OperatorAction {
  /** bigint as a string. */
  readonly id: string;
  readonly time: Date;
  readonly state: OperatorActionState;
  /** When the entry took its final state; `null` while `started`. */
  readonly completedAt: Date | null;
}

/**
 * Who acts: `STORAGE_ACTOR` when set (an HTTP caller's identity, a CI job's name), otherwise
 * the operating-system user and host, `user@host`.
 */
export function resolveActor(env: Environment): string {
  const named = loadSetting(env, STORAGE_ACTOR);
  if (named) return named;
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    // A container user without a passwd entry.
    user = env.USER ?? env.LOGNAME ?? `uid ${process.getuid?.() ?? '?'}`;
  }
  return `${user}@${hostname()}`;
}

/**
 * Writes one entry on `client`, `completed` unless `state` says otherwise. Pass the action's own
 * transaction's client when the action is a database change, so the entry commits (or rolls
 * back) with it.
 * @throws AuditUnavailableError when the database refused the entry; a transient error (a
 *   connection lost, a timeout) keeps its driver type, so a batch's retry still sees it.
 */
export async function recordOperatorAction(
  client: Queryable,
  action: OperatorAction,
  state: OperatorActionState = 'completed',
): Promise<OperatorActionEntry> {
  let result;
  try {
    result = await client.query<{ id: string; time: Date; completed_at: Date | null }>(
      `INSERT INTO operator_actions (actor, command, arguments, outcome, state, completed_at)
       VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, CASE WHEN $5 = 'started' THEN NULL ELSE now() END)
       RETURNING id::text AS id, time, completed_at`,
      [action.actor, action.command, JSON.stringify(action.arguments), JSON.stringify(action.outcome), state],
    );
  } catch (error) {
    if (isTransientError(error)) throw error;
    throw auditUnavailable(error);
  }
  const row = result.rows[0];
  if (row === undefined) throw new AuditUnavailableError('INSERT INTO operator_actions returned no row', undefined);
  return { ...action, id: row.id, time: row.time, state, completedAt: row.completed_at };
}

/**
 * The entry of an action made in `client`'s open transaction, by `policy`. `required`: as
 * {@link recordOperatorAction} (a refused entry throws and the transaction must roll back).
 * `waived`: a refused entry is rolled back to a savepoint and the action goes on, unrecorded;
 * the answer says why. Transient errors are thrown either way.
 */
export async function recordInTransaction(client: Queryable, action: OperatorAction, policy: AuditPolicy): Promise<AuditRecord> {
  if (policy === 'required') return { id: (await recordOperatorAction(client, action)).id };
  await client.query('SAVEPOINT operator_action');
  try {
    const entry = await recordOperatorAction(client, action);
    await client.query('RELEASE SAVEPOINT operator_action');
    return { id: entry.id };
  } catch (error) {
    if (!(error instanceof AuditUnavailableError)) throw error;
    await client.query('ROLLBACK TO SAVEPOINT operator_action');
    return { unrecorded: error.reason };
  }
}

/**
 * Completes a `started` entry: its final state and outcome (what really happened). Returns
 * false when there was no such `started` entry.
 * @throws AuditUnavailableError (or a transient driver error) when the database refused it.
 */
export async function completeOperatorAction(
  client: Queryable,
  id: string,
  state: Exclude<OperatorActionState, 'started'>,
  outcome: OperatorActionOutcome,
): Promise<boolean> {
  try {
    const result = await client.query(
      `UPDATE operator_actions SET state = $2, outcome = $3::jsonb, completed_at = now() WHERE id = $1::bigint AND state = 'started'`,
      [id, state, JSON.stringify(outcome)],
    );
    return (result.rowCount ?? 0) === 1;
  } catch (error) {
    if (isTransientError(error)) throw error;
    throw auditUnavailable(error);
  }
}

/** The newest `limit` entries since `since` (all when omitted), listed oldest first. */
export async function listOperatorActions(
  client: Queryable,
  filter: { readonly since?: Date; readonly limit?: number } = {},
): Promise<OperatorActionEntry[]> {
  const result = await client.query<{
    id: string;
    time: Date;
    actor: string;
    command: string;
    arguments: Record<string, unknown>;
    outcome: OperatorActionOutcome;
    state: OperatorActionState;
    completed_at: Date | null;
  }>(
    // Qualified: a bare `id` would be the text output column, and "newest" would sort "9" above "10".
    `SELECT * FROM (
       SELECT id::text AS id, time, actor, command, arguments, outcome, state, completed_at FROM operator_actions
        WHERE $1::timestamptz IS NULL OR time >= $1 ORDER BY operator_actions.id DESC LIMIT $2
     ) AS newest ORDER BY id::bigint`,
    [filter.since ?? null, filter.limit ?? 1000],
  );
  return result.rows.map(({ completed_at: completedAt, ...entry }) => ({ ...entry, completedAt }));
}
