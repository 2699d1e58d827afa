import type { Queryable } from '../shared/queryable.js';
import type { RejectionReason, Violations } from '../shared/records.js';

/** Which dead letters a command works on; every field narrows the selection. */
export interface DeadLetterFilter {
  /** A pipeline name (the command line checks it is a known one). */
  readonly pipeline?: string;
  readonly reason?: RejectionReason;
  /** Stored at or after this instant. */
  readonly since?: Date;
  /** Only the ones not re-driven yet. */
  readonly pendingOnly?: boolean;
}

/** A dead letter as `dlq list` shows it (no payload). */
export interface DeadLetterSummary {
  /** BIGSERIAL as text. */
  readonly id: string;
  readonly pipeline: string;
  readonly topic: string;
  readonly partition: number;
  /** BIGINT as text: never rounded. */
  readonly offset: string;
  readonly reason: string;
  readonly detail: string;
  /** Bytes of the original value. */
  readonly payloadSize: number;
  /** Bytes kept; fewer than `payloadSize` means truncated (cannot be re-driven). */
  readonly storedSize: number;
  readonly createdAt: Date;
  readonly redrivenAt: Date | null;
}

/** One dead letter with everything stored about it, for `dlq show` and the re-drive. */
export interface StoredDeadLetter extends DeadLetterSummary {
  readonly kafkaTimestamp: Date | null;
  readonly key: Buffer | null;
  readonly payload: Buffer | null;
  readonly payloadSha256: Buffer;
  /** As stored: `[{name | name_base64, value (base64)}]`. */
  readonly headers: ReadonlyArray<{ readonly name?: string; readonly name_base64?: string; readonly value: string }>;
  /** Every contract violation (the first 20 and the total), when there was more than one. */
  readonly violations: Violations | null;
}

interface SummaryRow {
  id: string;
  pipeline: string;
  topic: string;
  partition: number;
  kafka_offset: string;
  reason: string;
  detail: string;
  payload_size: number;
  stored_size: number | null;
  created_at: Date;
  redriven_at: Date | null;
}

interface FullRow extends SummaryRow {
  kafka_timestamp: Date | null;
  message_key: Buffer | null;
  payload: Buffer | null;
  payload_sha256: Buffer;
  headers: StoredDeadLetter['headers'];
  violations: Violations | null;
}

// `id::text` keeps its output name `id`, and a bare ORDER BY name means the output column first:
// the queries order by `dead_letter_events.id` (the bigint) so that 10 comes after 9
// (test/unit/helpers/sql-order.test.ts checks every query of the repository for this).
const SUMMARY_COLUMNS = `id::text, pipeline, topic, partition, kafka_offset::text, reason, detail, payload_size,
  octet_length(payload) AS stored_size, created_at, redriven_at`;
const FULL_COLUMNS = `${SUMMARY_COLUMNS}, kafka_timestamp, message_key, payload, payload_sha256, headers, violations`;

function toSummary(row: SummaryRow): DeadLetterSummary {
  return {
    id: row.id,
    pipeline: row.pipeline,
    topic: row.topic,
    partition: row.partition,
    offset: row.kafka_offset,
    reason: row.reason,
    detail: row.detail,
    payloadSize: row.payload_size,
    storedSize: row.stored_size ?? 0,
    createdAt: row.created_at,
    redrivenAt: row.redriven_at,
  };
}

function toStored(row: FullRow): StoredDeadLetter {
  return {
    ...toSummary(row),
    kafkaTimestamp: row.kafka_timestamp,
    key: row.message_key,
    payload: row.payload,
    payloadSha256: row.payload_sha256,
    headers: row.headers,
    violations: row.violations,
  };
}

/** A stored payload shorter than the original was truncated: it cannot be re-driven. */
export function isTruncated(letter: Pick<DeadLetterSummary, 'payloadSize' | 'storedSize'>): boolean {
  return letter.storedSize < letter.payloadSize;
}

/** The WHERE clause of a filter, its parameters appended to `params`. */
function where(filter: DeadLetterFilter, params: unknown[]): string {
  const conditions: string[] = [];
  const bind = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  if (filter.pipeline !== undefined) conditions.push(`pipeline = ${bind(filter.pipeline)}`);
  if (filter.reason !== undefined) conditions.push(`reason = ${bind(filter.reason)}`);
  if (filter.since !== undefined) conditions.push(`created_at >= ${bind(filter.since)}`);
  if (filter.pendingOnly === true) conditions.push('redriven_at IS NULL');
  return conditions.length === 0 ? 'TRUE' : conditions.join(' AND ');
}

/** The newest `limit` matching dead letters, newest first, and how many match in all. */
export async function listDeadLetters(
  db: Queryable,
  filter: DeadLetterFilter,
  limit: number,
): Promise<{ total: number; letters: DeadLetterSummary[] }> {
  const params: unknown[] = [];
  const condition = where(filter, params);
  const total = await db.query<{ total: string }>(`SELECT count(*)::text AS total FROM dead_letter_events WHERE ${condition}`, params);
  const rows = await db.query<SummaryRow>(
    `SELECT ${SUMMARY_COLUMNS} FROM dead_letter_events WHERE ${condition} ORDER BY dead_letter_events.id DESC LIMIT ${Math.trunc(limit)}`,
    params,
  );
  return { total: Number(total.rows[0]?.total ?? 0), letters: rows.rows.map(toSummary) };
}

/** One dead letter by id, or `undefined`. */
export async function findDeadLetter(db: Queryable, id: string): Promise<StoredDeadLetter | undefined> {
  const result = await db.query<FullRow>(`SELECT ${FULL_COLUMNS} FROM dead_letter_events WHERE id = $1`, [id]);
  const row = result.rows[0];
  return row === undefined ? undefined : toStored(row);
}

/**
 * The next `limit` dead letters of one pipeline not re-driven yet, in id order after `afterId`
 * (keyset paging: the ones that fail again stay pending and must not be met twice in one run).
 */
export async function nextPendingDeadLetters(
  db: Queryable,
  filter: DeadLetterFilter & { readonly pipeline: string },
  afterId: string,
  limit: number,
): Promise<StoredDeadLetter[]> {
  const params: unknown[] = [afterId];
  const condition = where({ ...filter, pipeline: undefined, pendingOnly: true }, params);
  params.push(filter.pipeline);
  const result = await db.query<FullRow>(
    `SELECT ${FULL_COLUMNS} FROM dead_letter_events
      WHERE id > $1::bigint AND ${condition} AND pipeline = $${params.length}
      ORDER BY dead_letter_events.id LIMIT ${Math.trunc(limit)}`,
    params,
  );
  return result.rows.map(toStored);
}

/** The pipelines that have dead letters matching the filter. */
export async function pipelinesWithDeadLetters(db: Queryable, filter: DeadLetterFilter): Promise<string[]> {
  const params: unknown[] = [];
  const result = await db.query<{ pipeline: string }>(
    `SELECT DISTINCT pipeline FROM dead_letter_events WHERE ${where(filter, params)} ORDER BY pipeline`,
    params,
  );
  return result.rows.map((row) => row.pipeline);
}

/** Dead letters per pipeline and reason: how many are waiting and how many were re-driven. */
export interface DeadLetterCount {
  readonly pipeline: string;
  readonly reason: string;
  readonly pending: number;
  readonly redriven: number;
}

/** Counts by pipeline and reason, for `verify`. */
export async function countDeadLetters(db: Queryable): Promise<DeadLetterCount[]> {
  const result = await db.query<{ pipeline: string; reason: string; pending: string; redriven: string }>(
    `SELECT pipeline, reason,
            count(*) FILTER (WHERE redriven_at IS NULL)::text AS pending,
            count(*) FILTER (WHERE redriven_at IS NOT NULL)::text AS redriven
       FROM dead_letter_events GROUP BY pipeline, reason ORDER BY pipeline, reason`,
  );
  return result.rows.map((row) => ({
    pipeline: row.pipeline,
    reason: row.reason,
    pending: Number(row.pending),
    redriven: Number(row.redriven),
  }));
}

/**
 * Reasons whose pending letter is the only copy of a valid message (its offset was committed):
 * a purge takes them only when `--reason` names that reason.
 */
export const REDRIVABLE_REASONS: readonly RejectionReason[] = ['unknown_application', 'rejected_by_database'];

/** Which dead letters a purge takes: the filter's, stored before `before`, re-driven unless told otherwise. */
export interface PurgeSelection extends DeadLetterFilter {
  /** Only letters stored before this instant. */
  readonly before: Date;
  /**
   * Also letters never re-driven, except those of a re-drivable reason (`REDRIVABLE_REASONS`)
   * unless `reason` names it.
   */
  readonly includePending: boolean;
}

/** What a purge takes (or took) of one pipeline and reason. */
export interface PurgeGroup {
  readonly pipeline: string;
  readonly reason: string;
  readonly count: number;
  /** Of them, letters never re-driven (pending): their messages are gone once deleted. */
  readonly pending: number;
  /** `created_at` of the oldest and the newest letter of the group. */
  readonly oldest: Date;
  readonly newest: Date;
}

/** A purge's set: its groups, and a digest of its ids that tells two sets apart. */
export interface PurgeSet {
  readonly groups: PurgeGroup[];
  readonly total: number;
  /** The first 12 hex digits of the md5 of the ids in order, comma-separated. */
  readonly digest: string;
}

/** Pending letters of the purge's age and filter that it leaves alone. */
export interface PendingKept {
  readonly total: number;
  /** Of them, letters of a re-drivable reason (the only copy of a valid message). */
  readonly redrivable: number;
}

interface PurgeGroupRow {
  pipeline: string;
  reason: string;
  count: string;
  pending: string;
  oldest: Date;
  newest: Date;
  digest: string;
}

/** Whether a pending letter is taken: never, always (its re-drivable reason named), or unless re-drivable. */
function pendingIncluded(selection: PurgeSelection): string {
  if (!selection.includePending) return 'FALSE';
  if (selection.reason !== undefined && REDRIVABLE_REASONS.includes(selection.reason)) return 'TRUE';
  return `reason NOT IN (${REDRIVABLE_REASONS.map((reason) => `'${reason}'`).join(', ')})`;
}

/** The filter and the age: every letter a purge looks at, taken or kept. */
function purgeScope(selection: PurgeSelection, params: unknown[]): string {
  const scope = where({ ...selection, pendingOnly: undefined }, params);
  params.push(selection.before);
  return `${scope} AND created_at < $${params.length}`;
}

function purgeCondition(selection: PurgeSelection, params: unknown[]): string {
  return `${purgeScope(selection, params)} AND (redriven_at IS NOT NULL OR ${pendingIncluded(selection)})`;
}

const EMPTY_DIGEST = "left(md5(''), 12)";

/** Groups plus the digest of the whole set, over a relation `source` of (id, pipeline, reason, created_at). */
function groupedWithDigest(source: string): string {
  return `SELECT pipeline, reason, count(*)::text AS count, count(*) FILTER (WHERE redriven_at IS NULL)::text AS pending,
                 min(created_at) AS oldest, max(created_at) AS newest,
                 (SELECT left(md5(coalesce(string_agg(id::text, ',' ORDER BY id), '')), 12) FROM ${source}) AS digest
            FROM ${source} GROUP BY pipeline, reason ORDER BY pipeline, reason`;
}

async function toSet(db: Queryable, rows: readonly PurgeGroupRow[]): Promise<PurgeSet> {
  const groups = rows.map((row) => ({
    pipeline: row.pipeline,
    reason: row.reason,
    count: Number(row.count),
    pending: Number(row.pending),
    oldest: row.oldest,
    newest: row.newest,
  }));
  const digest = rows[0]?.digest ?? (await db.query<{ digest: string }>(`SELECT ${EMPTY_DIGEST} AS digest`)).rows[0]?.digest ?? '';
  return { groups, total: groups.reduce((sum, group) => sum + group.count, 0), digest };
}

/** What `purgeDeadLetters` would delete, per pipeline and reason, with the set's digest; deletes nothing. */
export async function purgeableDeadLetters(db: Queryable, selection: PurgeSelection): Promise<PurgeSet> {
  const params: unknown[] = [];
  const result = await db.query<PurgeGroupRow>(
    `WITH selected AS (SELECT id, pipeline, reason, created_at, redriven_at FROM dead_letter_events
                        WHERE ${purgeCondition(selection, params)})
     ${groupedWithDigest('selected')}`,
    params,
  );
  return toSet(db, result.rows);
}

/** Deletes the selected dead letters in one statement; returns what it deleted, per pipeline and reason. */
export async function purgeDeadLetters(db: Queryable, selection: PurgeSelection): Promise<PurgeSet> {
  const params: unknown[] = [];
  const result = await db.query<PurgeGroupRow>(
    `WITH deleted AS (DELETE FROM dead_letter_events WHERE ${purgeCondition(selection, params)}
                      RETURNING id, pipeline, reason, created_at, redriven_at)
     ${groupedWithDigest('deleted')}`,
    params,
  );
  return toSet(db, result.rows);
}

/** The pending letters of the purge's age and filter that it leaves alone, and how many of them are re-drivable. */
export async function pendingKeptByPurge(db: Queryable, selection: PurgeSelection): Promise<PendingKept> {
  const params: unknown[] = [];
  const result = await db.query<{ total: string; redrivable: string }>(
    `SELECT count(*)::text AS total,
            count(*) FILTER (WHERE reason IN (${REDRIVABLE_REASONS.map((reason) => `'${reason}'`).join(', ')}))::text AS redrivable
       FROM dead_letter_events
      WHERE ${purgeScope(selection, params)} AND redriven_at IS NULL AND NOT (${pendingIncluded(selection)})`,
    params,
  );
  return { total: Number(result.rows[0]?.total ?? 0), redrivable: Number(result.rows[0]?.redrivable ?? 0) };
}
