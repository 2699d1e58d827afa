/**
 * `storage-consumer reconcile`, the check itself (the command is cli/commands/reconcile.ts): every
 * record of a pipeline's topic up to its group's committed offset is read back from Kafka,
 * decoded and resolved as a batch would (shared/process-batch.ts), and accounted for in
 * PostgreSQL: its row, a row that wins over it by the table's rule, or its dead letter
 * (docs/operations.md, "Proving nothing was lost"). Kafka is read without a consumer group
 * (kafka/partition-reader.ts); PostgreSQL in read-only transactions, a few thousand records per
 * transaction with one statement per table, whatever the topic holds.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { PartitionBounds, PartitionReader, TopicBounds } from '../kafka/partition-reader.js';
import { PartitionRangeGoneError } from '../kafka/partition-reader.js';
import type { ConsumerSettings } from '../config/pipeline-settings.js';
import { arrayParameter } from '../shared/array-literal.js';
import type { DeadLetter } from '../shared/dead-letters.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import type { SourceRecord } from '../shared/kafka-event-builder.js';
import { parseKafkaEvent } from '../shared/kafka-event.js';
import type { BoundRow, PipelineDefinition } from '../shared/pipeline-spec.js';
import { PIPELINES } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import { bindApplications, decodeAll } from '../shared/process-batch.js';
import type { KafkaRecord } from '../shared/records.js';
import { ApplicationResolver } from '../shared/resolver.js';
import type { ColumnDescription, TableDescription } from '../shared/upsert.js';

/** What each checked record turned out to be, in the order reports list them. */
export const RECORD_CLASSES = ['stored', 'superseded', 'dead_lettered', 'letter_gone', 'missing', 'wrong'] as const;
export type RecordClass = (typeof RECORD_CLASSES)[number];
/** The classes reported record by record; `missing` and `wrong` fail the check. */
export const PROBLEM_CLASSES = ['letter_gone', 'missing', 'wrong'] as const satisfies readonly RecordClass[];
export type ProblemClass = (typeof PROBLEM_CLASSES)[number];

/** Where the check starts in each partition: the earliest offset on the broker, or the first record at or after an instant. */
export type ReconcileStart = { readonly kind: 'earliest' } | { readonly kind: 'since'; readonly at: Date };

/** One record reported by its coordinates, with what was expected and what was found. */
export interface Problem {
  readonly class: ProblemClass;
  readonly partition: number;
  readonly offset: string;
  /** The natural key the record decodes to (`review_id`, `application_id|crawled_at`, `analysis_id`); null when it does not decode. */
  readonly key: string | null;
  readonly expected: string;
  readonly found: string;
  /** `letter_gone`: the audited `dlq purge` entries that could have deleted the letter (ids, ascending). */
  readonly purges?: readonly string[];
}

export type ClassCounts = Record<RecordClass, number>;

/** One partition of one pipeline: the range checked and what its records are. */
export interface PartitionCheck {
  readonly partition: number;
  /** The partition when the run began. */
  readonly bounds: PartitionBounds;
  /** The offsets checked: `[from, to)`; `to` is the committed offset read at the start, `from === to` when nothing was. */
  readonly from: bigint;
  readonly to: bigint;
  records: number;
  readonly counts: ClassCounts;
  /** The first {@link ReconcileOptions.problemsShown} records of each problem class. */
  readonly problems: Problem[];
  /** What could not be checked and why, in words (no committed offset, records removed by retention ...). */
  readonly notes: string[];
}

/** One pipeline's topic. */
export interface PipelineCheck {
  readonly pipeline: PipelineName;
  readonly topic: string;
  readonly group: string;
  readonly topicId: string | null;
  readonly partitions: PartitionCheck[];
  readonly notes: string[];
}

/** The whole run. */
export interface ReconcileReport {
  readonly start: ReconcileStart;
  /** When the committed offsets were read: every record before them was promised stored. */
  readonly readAt: Date;
  readonly pipelines: PipelineCheck[];
  readonly elapsedMs: number;
}

/** Records checked so far against the total to check (offsets, so a compacted topic ends early). */
export interface ReconcileProgress {
  readonly checked: number;
  readonly total: number;
  readonly elapsedMs: number;
}

export interface ReconcileOptions {
  readonly pool: pg.Pool;
  readonly reader: PartitionReader;
  readonly settings: ConsumerSettings;
  readonly pipelines: readonly PipelineName[];
  readonly start: ReconcileStart;
  /** Records per read-only transaction (one statement per table each). */
  readonly chunkRecords?: number;
  /** Problem records kept per class and partition (default 10). */
  readonly problemsShown?: number;
  readonly onProgress?: (progress: ReconcileProgress) => void;
}

const DEFAULT_CHUNK_RECORDS = 2_000;
const DEFAULT_PROBLEMS_SHOWN = 10;

/** How a row that came from another record can still be right: the table's own rule of who wins. */
type WinnerRule = { readonly kind: 'first' } | { readonly kind: 'newest'; readonly column: string };

/**
 * Per pipeline, which record a row keeps (docs/design.md section 6): app-stats and network-metrics
 * insert with DO NOTHING (the first stored wins), reviews update when `last_synced_at` is newer
 * (on a tie the first stored stays).
 */
const WINNER_RULES: Readonly<Record<PipelineName, WinnerRule>> = {
  'app-stats': { kind: 'first' },
  reviews: { kind: 'newest', column: 'last_synced_at' },
  'network-metrics': { kind: 'first' },
};

/** What the flow needs of any pipeline's message. */
type Message = { readonly package_name: string };
type Definition = PipelineDefinition<Message, PipelineName>;
type Column = ColumnDescription<BoundRow<Message>>;

const LINEAGE = new Set(['source_partition', 'source_offset']);

/**
 * The columns a record writes and the check compares: every column of an insert-once table;
 * the columns an update writes on a table that updates (reviews: never its key or application,
 * which stay the first version's). Lineage is compared apart.
 */
function comparedColumns(table: TableDescription<BoundRow<Message>>): Column[] {
  const written = table.update ? new Set(table.update.columns) : undefined;
  return table.columns.filter((column) => !LINEAGE.has(column.name) && (written === undefined || written.has(column.name)));
}

const statements = new WeakMap<object, string>();

/**
 * One statement for a chunk's rows: the chunk's values as one array parameter per column (the
 * upsert's own, cast as it casts them), joined to the table on its natural key. Per input row:
 * whether a row exists, its lineage, the compared columns that differ from what this record
 * writes, where the row's version stands against this record's (tables with a newest-wins rule),
 * and the row itself when it claims this record but differs.
 */
function rowCheckStatement(definition: Definition, rule: WinnerRule): string {
  const cached = statements.get(definition);
  if (cached !== undefined) return cached;
  const { table } = definition;
  const names = [...table.columns.map((column) => column.name), 'position'];
  const parameters = [...table.columns.map((column, index) => `$${index + 1}::${column.type}[]`), `$${table.columns.length + 1}::int[]`];
  const value = (column: Column) => column.select ?? `input.${column.name}`;
  const differing = comparedColumns(table).map(
    (column) => `CASE WHEN stored.${column.name} IS DISTINCT FROM ${value(column)} THEN '${column.name}' END`,
  );
  const versionColumn = rule.kind === 'newest' ? table.columns.find((column) => column.name === rule.column) : undefined;
  const version = versionColumn
    ? `CASE WHEN stored.${versionColumn.name} > ${value(versionColumn)} THEN 1 ` +
      `WHEN stored.${versionColumn.name} = ${value(versionColumn)} THEN 0 ELSE -1 END`
    : 'NULL::int';
  const [firstKey] = table.conflictColumns;
  const sql =
    `SELECT input.position, stored.${firstKey} IS NOT NULL AS found, stored.source_partition, ` +
    'stored.source_offset::text AS source_offset, ' +
    `compared.differing, ${version} AS version_order, ` +
    (versionColumn ? `stored.${versionColumn.name}::text AS stored_version, ` : 'NULL::text AS stored_version, ') +
    `CASE WHEN cardinality(compared.differing) > 0 AND stored.source_partition = input.source_partition ` +
    `AND stored.source_offset = input.source_offset THEN to_jsonb(stored) END AS found_row ` +
    `FROM unnest(${parameters.join(', ')}) AS input(${names.join(', ')}) ` +
    `LEFT JOIN ${table.name} AS stored ON ${table.conflictColumns.map((key) => `stored.${key} = input.${key}`).join(' AND ')} ` +
    `CROSS JOIN LATERAL (SELECT array_remove(ARRAY[${differing.join(', ')}]::text[], NULL) AS differing) AS compared`;
  statements.set(definition, sql);
  return sql;
}

interface RowFinding {
  readonly position: number;
  readonly found: boolean;
  readonly source_partition: number | null;
  readonly source_offset: string | null;
  readonly differing: string[];
  readonly version_order: number | null;
  readonly stored_version: string | null;
  readonly found_row: Record<string, unknown> | null;
}

interface LetterFinding {
  readonly kafka_offset: string;
  readonly payload_sha256: Buffer;
  readonly reason: string;
}

/** The sha256 a dead letter stores of its record's value (of zero bytes for a null value). */
function valueDigest(record: KafkaRecord): Buffer {
  return createHash('sha256')
    .update(record.value ?? Buffer.alloc(0))
    .digest();
}

/** A value as a problem line shows it: short, on one line. */
function shown(value: unknown): string {
  const text = value === null || value === undefined ? 'NULL' : typeof value === 'string' ? value : JSON.stringify(value);
  const chars = [...text.replaceAll('\n', ' ')];
  return chars.length <= 60 ? chars.join('') : `${chars.slice(0, 59).join('')}…`;
}

function emptyCounts(): ClassCounts {
  return { stored: 0, superseded: 0, dead_lettered: 0, letter_gone: 0, missing: 0, wrong: 0 };
}

/** Opens a read-only transaction (one snapshot for its statements) with the statement timeout set inside it, so a pooler passes it on. */
async function readOnly<T>(pool: pg.Pool, settings: ConsumerSettings, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query(
      `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = ${Math.trunc(settings.database.statementTimeoutMs)}`,
    );
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // A failed transaction's connection is not reused: the pool cancels what it may still run.
    client.release(failed ? new Error('reconcile: transaction failed') : undefined);
  }
}

/**
 * The audited `dlq purge` entries, for naming those that could account for a letter that is gone:
 * of its pipeline (or all) and its reason (or all). Not by time: a purge's cut-off is the
 * database's clock, a record's timestamp its producer's.
 */
interface PurgeEntry {
  readonly id: string;
  readonly pipeline: string | undefined;
  readonly reason: string | undefined;
}

async function readPurges(pool: pg.Pool, settings: ConsumerSettings): Promise<PurgeEntry[]> {
  const { rows } = await readOnly(pool, settings, (client) =>
    client.query<{ id: string; arguments: Record<string, unknown> }>(
      // By the bigint: ids sorted as text would put "10" before "9".
      "SELECT id::text AS id, arguments FROM operator_actions WHERE command = 'dlq purge' AND state = 'completed' " +
        'ORDER BY operator_actions.id',
    ),
  );
  return rows.map((row) => ({
    id: row.id,
    pipeline: typeof row.arguments.pipeline === 'string' ? row.arguments.pipeline : undefined,
    reason: typeof row.arguments.reason === 'string' ? row.arguments.reason : undefined,
  }));
}

/** The topic id the last completed reconcile saw for `topic`, if any recorded one. */
async function lastSeenTopicId(pool: pg.Pool, settings: ConsumerSettings, topic: string): Promise<string | undefined> {
  const { rows } = await readOnly(pool, settings, (client) =>
    client.query<{ id: string | null }>(
      `SELECT outcome -> 'topicIds' ->> $1 AS id FROM operator_actions WHERE command = 'reconcile' AND state = 'completed' ` +
        `AND outcome -> 'topicIds' ? $1 ORDER BY operator_actions.id DESC LIMIT 1`,
      [topic],
    ),
  );
  return rows[0]?.id ?? undefined;
}

/** Per partition, what the run checks: `[from, to)` and what could not be checked, in words. */
function plannedRange(bounds: PartitionBounds, start: ReconcileStart, sinceOffset: bigint | undefined, group: string) {
  const notes: string[] = [];
  const from0 = start.kind === 'earliest' ? bounds.start : (sinceOffset ?? bounds.end);
  const from = from0 < bounds.start ? bounds.start : from0;
  if (bounds.committed === null) {
    notes.push(
      `group ${group} has no committed offset on partition ${bounds.partition}: no record of it is promised stored yet; nothing checked`,
    );
    return { from, to: from, notes };
  }
  if (bounds.committed < bounds.start) {
    notes.push(
      `the committed offset ${bounds.committed} is below the partition's start ${bounds.start}: offsets ${bounds.committed} to ` +
        `${bounds.start - 1n} were removed from the broker before the group read them; they cannot be checked`,
    );
  } else if (bounds.start > 0n && start.kind === 'earliest') {
    notes.push(
      `offsets 0 to ${bounds.start - 1n} are no longer on the broker (retention or deleted records): checked from ${bounds.start}`,
    );
  }
  const to = bounds.committed;
  return { from: from > to ? to : from, to, notes };
}

/** The check of one chunk of one partition's records, in one read-only transaction. */
async function checkChunk(
  options: ReconcileOptions,
  definition: Definition,
  topic: string,
  resolver: ApplicationResolver,
  sources: readonly SourceRecord[],
  check: PartitionCheck,
  purges: () => Promise<PurgeEntry[]>,
): Promise<void> {
  const rule = WINNER_RULES[definition.name];
  const records = parseKafkaEvent(buildKafkaEvent(sources));
  const { messages, rejections } = decodeAll(definition, records);
  const { bound, letterOf, rows, letters } = await readOnly(options.pool, options.settings, async (client) => {
    const applications = await resolver.resolve(
      client,
      messages.map((decoded) => decoded.message.package_name),
    );
    const { bound, letters: unknown } = bindApplications(definition.name, messages, applications);
    const expectedLetters = new Map<KafkaRecord, DeadLetter>([...rejections, ...unknown].map((letter) => [letter.record, letter]));
    const found =
      bound.length === 0
        ? []
        : (
            await client.query<RowFinding>(rowCheckStatement(definition, rule), [
              ...definition.table.columns.map((column) => arrayParameter(bound.map(column.value))),
              arrayParameter(bound.map((_row, index) => index)),
            ])
          ).rows;
    // Dead letters at every offset that is not plainly its own row: an expected letter, or a row
    // that is missing, claims another record or differs (rejected by the database, unknown then).
    const byPosition = new Map(found.map((finding) => [finding.position, finding]));
    const ownRow = (index: number) => {
      const finding = byPosition.get(index);
      const row = bound[index];
      return (
        finding?.found === true &&
        row !== undefined &&
        finding.source_partition === row.record.partition &&
        finding.source_offset === String(row.record.offset) &&
        finding.differing.length === 0
      );
    };
    const offsets = [
      ...[...expectedLetters.keys()].map((record) => record.offset),
      ...bound.filter((_row, index) => !ownRow(index)).map((row) => row.record.offset),
    ];
    const stored =
      offsets.length === 0
        ? []
        : (
            await client.query<LetterFinding>(
              'SELECT kafka_offset::text AS kafka_offset, payload_sha256, reason FROM dead_letter_events ' +
                'WHERE topic = $1 AND partition = $2 AND kafka_offset = ANY($3::bigint[])',
              [topic, check.partition, offsets],
            )
          ).rows;
    return { bound, letterOf: expectedLetters, rows: byPosition, letters: stored };
  });

  const letterAt = (record: KafkaRecord) => {
    const digest = valueDigest(record);
    return letters.find((letter) => letter.kafka_offset === String(record.offset) && letter.payload_sha256.equals(digest));
  };
  const place = (partition: number | null, offset: string | null) =>
    partition === null || offset === null ? 'no lineage' : `${topic}-${partition}@${offset}`;
  const report = async (record: KafkaRecord, problem: Omit<Problem, 'partition' | 'offset'>) => {
    check.counts[problem.class] += 1;
    const kept = check.problems.filter((known) => known.class === problem.class).length;
    if (kept >= (options.problemsShown ?? DEFAULT_PROBLEMS_SHOWN)) return;
    let purgesFor: string[] | undefined;
    if (problem.class === 'letter_gone') {
      const letter = letterOf.get(record);
      purgesFor = (await purges())
        .filter(
          (purge) =>
            (purge.pipeline === undefined || purge.pipeline === definition.name) &&
            (purge.reason === undefined || purge.reason === letter?.rejection.reason),
        )
        .map((purge) => purge.id);
    }
    check.problems.push({
      ...problem,
      partition: record.partition,
      offset: String(record.offset),
      ...(purgesFor === undefined ? {} : { purges: purgesFor }),
    });
  };

  check.records += records.length;
  for (const [record, letter] of letterOf) {
    if (letterAt(record) !== undefined) check.counts.dead_lettered += 1;
    else
      await report(record, {
        class: 'letter_gone',
        key: null,
        expected: `a dead letter (${letter.rejection.reason}: ${shown(letter.rejection.detail)})`,
        found: 'no dead letter at these coordinates',
      });
  }
  for (const [index, row] of bound.entries()) {
    const finding = rows.get(index);
    const key = definition.naturalKey(row);
    const { record } = row;
    const claimsThis = finding?.source_partition === record.partition && finding.source_offset === String(record.offset);
    if (finding === undefined || !finding.found) {
      if (letterAt(record) !== undefined) check.counts.dead_lettered += 1;
      else
        await report(record, {
          class: 'missing',
          key,
          expected: `a ${definition.table.name} row for ${key} (or a dead letter)`,
          found: 'no row and no dead letter',
        });
      continue;
    }
    if (claimsThis) {
      if (finding.differing.length === 0) {
        check.counts.stored += 1;
        continue;
      }
      const columns = comparedColumns(definition.table).filter((column) => finding.differing.includes(column.name));
      await report(record, {
        class: 'wrong',
        key,
        expected: columns.map((column) => `${column.name} ${shown(column.value(row))}`).join(', '),
        found:
          `${columns.map((column) => `${column.name} ${shown(finding.found_row?.[column.name])}`).join(', ')} ` +
          '(the row names this record)',
      });
      continue;
    }
    if (letterAt(record) !== undefined) {
      check.counts.dead_lettered += 1;
      continue;
    }
    const lineage = place(finding.source_partition, finding.source_offset);
    const laterHere =
      finding.source_partition === record.partition &&
      finding.source_offset !== null &&
      BigInt(finding.source_offset) > BigInt(record.offset);
    if (rule.kind === 'newest' && finding.version_order !== null && finding.version_order < 0) {
      const versionColumn = definition.table.columns.find((column) => column.name === rule.column);
      await report(record, {
        class: 'wrong',
        key,
        expected: `${rule.column} ${shown(versionColumn?.value(row))} or newer (this record's)`,
        found: `${rule.column} ${shown(finding.stored_version)} from ${lineage}: an older version`,
      });
    } else if (finding.source_partition === null || (laterHere && (rule.kind === 'first' || finding.version_order === 0))) {
      // A later record of the same partition cannot have been stored first: this one was not stored.
      await report(record, {
        class: 'wrong',
        key,
        expected: `the row made from this record (the first stored${rule.kind === 'newest' ? ` of this ${rule.column}` : ''})`,
        found: `the row names ${lineage}`,
      });
    } else {
      check.counts.superseded += 1;
    }
  }
}

/** Reads `reader`'s records into chunks of `size`. */
async function* chunked(source: AsyncIterable<SourceRecord[]>, size: number): AsyncGenerator<SourceRecord[]> {
  let chunk: SourceRecord[] = [];
  for await (const records of source) {
    for (const record of records) {
      chunk.push(record);
      if (chunk.length >= size) {
        yield chunk;
        chunk = [];
      }
    }
  }
  if (chunk.length > 0) yield chunk;
}

/**
 * One chunk ahead: the next chunk is fetched from Kafka while the current one is checked in
 * PostgreSQL; at most two chunks are held.
 */
async function* prefetched<T>(source: AsyncGenerator<T>): AsyncGenerator<T> {
  let next = source.next();
  for (;;) {
    const current = await next;
    if (current.done === true) return;
    next = source.next();
    // A failing prefetch is seen when its turn comes; never as an unhandled rejection meanwhile.
    next.catch(() => undefined);
    yield current.value;
  }
}

/**
 * Runs the check over the selected pipelines. Every group's committed offsets are read first:
 * records past them are in flight, not promised yet.
 */
export async function reconcile(options: ReconcileOptions): Promise<ReconcileReport> {
  const began = performance.now();
  const readAt = new Date();
  const chunkRecords = options.chunkRecords ?? DEFAULT_CHUNK_RECORDS;
  let purgeList: Promise<PurgeEntry[]> | undefined;
  const purges = () => (purgeList ??= readPurges(options.pool, options.settings).catch(() => []));

  const planned = await Promise.all(
    options.pipelines.map(async (name) => {
      const { topic, group } = options.settings.pipelines[name];
      const bounds: TopicBounds = await options.reader.bounds(topic, group);
      const since = options.start.kind === 'since' ? await options.reader.offsetsAt(topic, options.start.at) : undefined;
      return { name, topic, group, bounds, since };
    }),
  );
  const pipelines: PipelineCheck[] = [];
  for (const { name, topic, group, bounds, since } of planned) {
    const notes: string[] = [];
    if (bounds.id === undefined && bounds.idError !== undefined) notes.push(`the topic's id could not be read (${bounds.idError})`);
    if (bounds.id !== undefined) {
      const previous = await lastSeenTopicId(options.pool, options.settings, topic).catch(() => undefined);
      if (previous !== undefined && previous !== bounds.id)
        notes.push(
          `topic ${topic} was re-created since the last reconcile (id ${previous}, now ${bounds.id}): the old topic's records are gone ` +
            'and its group offsets with it; rows stored from them may share coordinates with the new records ' +
            '(dead letters are told apart by ' +
            `their payload's hash); checked the new topic only`,
        );
    }
    const partitions = bounds.partitions.map((partition): PartitionCheck => {
      const range = plannedRange(partition, options.start, since?.get(partition.partition), group);
      return { partition: partition.partition, bounds: partition, ...range, records: 0, counts: emptyCounts(), problems: [] };
    });
    pipelines.push({ pipeline: name, topic, group, topicId: bounds.id ?? null, partitions, notes });
  }

  const total = pipelines.reduce((sum, pipeline) => sum + pipeline.partitions.reduce((all, p) => all + Number(p.to - p.from), 0), 0);
  let checked = 0;
  let lastProgress = 0;
  const progress = (force = false) => {
    const now = performance.now();
    if (!force && now - lastProgress < 1_000) return;
    lastProgress = now;
    options.onProgress?.({ checked, total, elapsedMs: now - began });
  };

  for (const pipeline of pipelines) {
    const definition = PIPELINES[pipeline.pipeline] as unknown as Definition;
    const resolver = new ApplicationResolver(options.settings.applicationCacheTtlMs);
    for (const check of pipeline.partitions) {
      if (check.from >= check.to) continue;
      try {
        const source = options.reader.read(pipeline.topic, check.partition, check.from, check.to);
        for await (const chunk of prefetched(chunked(source, chunkRecords))) {
          await checkChunk(options, definition, pipeline.topic, resolver, chunk, check, purges);
          checked += chunk.length;
          progress();
        }
      } catch (error) {
        if (!(error instanceof PartitionRangeGoneError)) throw error;
        check.notes.push(
          `offset ${error.offset} was removed from the broker while the check read it (retention or deleted records): ` +
            `the rest of the partition was not checked`,
        );
      }
    }
  }
  progress(true);
  return { start: options.start, readAt, pipelines, elapsedMs: performance.now() - began };
}

/** The counts of a pipeline, or of the whole run, summed over partitions. */
export function totalsOf(partitions: readonly PartitionCheck[]): ClassCounts & { records: number } {
  const totals = { records: 0, ...emptyCounts() };
  for (const partition of partitions) {
    totals.records += partition.records;
    for (const name of RECORD_CLASSES) totals[name] += partition.counts[name];
  }
  return totals;
}

/** Whether the run proves its promise: nothing missing, nothing wrong. */
export function reconciled(report: ReconcileReport): boolean {
  const totals = totalsOf(report.pipelines.flatMap((pipeline) => pipeline.partitions));
  return totals.missing === 0 && totals.wrong === 0;
}
