/**
 * The expected final state, from what the topics really hold: every record read back from the
 * log (partition, offset, plan id), so a message the producer wrote twice is expected twice.
 *
 * Per natural key the stored row must be one of a few acceptable (lineage, text) pairs:
 * - app_stats, network_metrics (`DO NOTHING`): the first record of the key stored wins. Within a
 *   partition that is the lowest offset; copies in several partitions race, so each partition's
 *   first copy is acceptable (the workload makes all copies of a key carry equal values).
 * - reviews (guarded update): the greatest `last_synced_at` wins; among records with that
 *   instant, the first stored, i.e. the lowest offset of its partition.
 */
import type { PipelineName } from '../shared/pipelines.js';
import type { RejectionReason } from '../shared/records.js';
import type { RowText } from '../fixtures/row-text.js';
import type { DataTable } from './stored-rows.js';
import { DATA_TABLES } from './stored-rows.js';
import type { PlannedMessage, Workload } from './plan.js';

/** One record as the topic holds it. */
export interface LoggedRecord {
  readonly topic: PipelineName;
  readonly partition: number;
  /** Kafka offsets are int64: kept as text, compared as bigint. */
  readonly offset: string;
  readonly planId: number;
}

/** A row the checker accepts for a key: its lineage and its exact text. */
export interface AcceptableRow {
  readonly partition: number;
  readonly offset: string;
  readonly text: RowText;
  readonly planId: number;
}

/** A dead letter the checker expects at a coordinate. */
export interface ExpectedDeadLetter {
  readonly reason: RejectionReason;
  readonly detailIncludes?: string;
  readonly planId: number;
}

/** Everything the database must hold at the end. */
export interface ExpectedState {
  readonly rows: Readonly<Record<DataTable, ReadonlyMap<string, readonly AcceptableRow[]>>>;
  /** Keyed `topic|partition|offset`. */
  readonly deadLetters: ReadonlyMap<string, ExpectedDeadLetter>;
}

/** `topic|partition|offset`, the identity of a dead letter (its payload hash is fixed by the record). */
export function coordinate(topic: string, partition: number, offset: string): string {
  return `${topic}|${partition}|${offset}`;
}

interface Candidate {
  readonly record: LoggedRecord;
  readonly message: PlannedMessage;
}

/** Each partition's lowest-offset candidate. */
function firstPerPartition(candidates: readonly Candidate[]): Candidate[] {
  const first = new Map<number, Candidate>();
  for (const candidate of candidates) {
    const kept = first.get(candidate.record.partition);
    if (kept === undefined || BigInt(candidate.record.offset) < BigInt(kept.record.offset))
      first.set(candidate.record.partition, candidate);
  }
  return [...first.values()];
}

/** Builds the expected state; throws when the log holds a record the plan does not know. */
export function expectedState(workload: Workload, records: readonly LoggedRecord[]): ExpectedState {
  const byKey = Object.fromEntries(DATA_TABLES.map((table) => [table, new Map<string, Candidate[]>()])) as Record<
    DataTable,
    Map<string, Candidate[]>
  >;
  const deadLetters = new Map<string, ExpectedDeadLetter>();
  for (const record of records) {
    const message = workload.messages[record.planId];
    if (message === undefined || message.topic !== record.topic) {
      throw new Error(
        `the log holds a record the plan does not know: ${record.topic}-${record.partition}@${record.offset} (plan ${record.planId})`,
      );
    }
    const outcome = message.expect;
    if (outcome.kind === 'dead_letter') {
      deadLetters.set(coordinate(record.topic, record.partition, record.offset), {
        reason: outcome.reason,
        detailIncludes: outcome.detailIncludes,
        planId: message.id,
      });
      continue;
    }
    const list = byKey[outcome.table].get(outcome.key) ?? [];
    list.push({ record, message });
    byKey[outcome.table].set(outcome.key, list);
  }

  const rows = Object.fromEntries(
    DATA_TABLES.map((table) => {
      const expected = new Map<string, AcceptableRow[]>();
      for (const [key, candidates] of byKey[table]) {
        let winners = candidates;
        if (table === 'reviews') {
          const synced = (candidate: Candidate) =>
            candidate.message.expect.kind === 'row' ? (candidate.message.expect.syncedAt ?? '') : '';
          const newest = candidates.reduce((max, candidate) => (synced(candidate) > max ? synced(candidate) : max), '');
          winners = candidates.filter((candidate) => synced(candidate) === newest);
        }
        expected.set(
          key,
          firstPerPartition(winners).map(({ record, message }) => ({
            partition: record.partition,
            offset: record.offset,
            text: message.expect.kind === 'row' ? message.expect.text : {},
            planId: message.id,
          })),
        );
      }
      return [table, expected];
    }),
  ) as Record<DataTable, Map<string, AcceptableRow[]>>;
  return { rows, deadLetters };
}
