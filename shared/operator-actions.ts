import { hostname, userInfo } from 'node:os';
import type { Environment } from './env.js';
import type { Queryable } from './queryable.js';

/**
 * The audit trail (`operator_actions`, migration 0005): every operator action that changes
 * state leaves one entry saying when, who, what and with what outcome. Both the CLI and the
 * host (HTTP pause / resume) write through this module, so the entries look alike.
 */

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
}

/**
 * Who acts: `STORAGE_ACTOR` when set (an HTTP caller's identity, a CI job's name), otherwise
 * the operating-system user and host, `user@host`.
 */
export function resolveActor(env: Environment): string {
  const named = env.STORAGE_ACTOR?.trim();
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
 * Writes one entry on `client`. Pass the action's own transaction's client when the action is
 * a database change, so the entry commits (or rolls back) with it.
 */
export async function recordOperatorAction(client: Queryable, action: OperatorAction): Promise<OperatorActionEntry> {
  const result = await client.query<{ id: string; time: Date }>(
    'INSERT INTO operator_actions (actor, command, arguments, outcome) VALUES ($1, $2, $3::jsonb, $4::jsonb) RETURNING id::text AS id, ' +
      'time',
    [action.actor, action.command, JSON.stringify(action.arguments), JSON.stringify(action.outcome)],
  );
  const row = result.rows[0];
  if (row === undefined) throw new Error('INSERT INTO operator_actions returned no row');
  return { ...action, id: row.id, time: row.time };
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
  }>(
    // Qualified: a bare `id` would be the text output column, and "newest" would sort "9" above "10".
    `SELECT * FROM (
       SELECT id::text AS id, time, actor, command, arguments, outcome FROM operator_actions
        WHERE $1::timestamptz IS NULL OR time >= $1 ORDER BY operator_actions.id DESC LIMIT $2
     ) AS newest ORDER BY id::bigint`,
    [filter.since ?? null, filter.limit ?? 1000],
  );
  return result.rows;
}
