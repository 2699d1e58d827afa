/**
 * Compares the database with the expected state, exactly: every row of every table, every dead
 * letter, and the consumer groups' committed offsets against the end of every partition.
 */
import type { Admin } from 'kafkajs';
import type { Queryable } from '../shared/queryable.js';
import type { ExpectedState } from './model.js';
import { coordinate } from './model.js';
import type { DataTable } from './stored-rows.js';
import { DATA_TABLES, differingColumns, readRows } from './stored-rows.js';
import { naturalKeyOf } from './plan.js';

/** Per table: expected keys, rows found, and what went wrong. */
export interface TableCheck {
  readonly table: DataTable;
  readonly expected: number;
  readonly found: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly wrong: number;
}

/** The verdict on the database. */
export interface DatabaseCheck {
  readonly tables: readonly TableCheck[];
  readonly lost: number;
  readonly duplicated: number;
  readonly wrong: number;
  readonly dlqExpected: number;
  readonly dlqFound: number;
  readonly dlqMissing: number;
  readonly dlqUnexpected: number;
  /** Found at the right coordinate with the wrong reason, or a detail without its SQLSTATE. */
  readonly dlqWrong: number;
  /** The first few problems, spelled out for a human. */
  readonly examples: readonly string[];
}

const MAX_EXAMPLES = 20;

/** Checks every table and the dead letters against `expected`. */
export async function checkDatabase(client: Queryable, expected: ExpectedState): Promise<DatabaseCheck> {
  const examples: string[] = [];
  const note = (line: string) => {
    if (examples.length < MAX_EXAMPLES) examples.push(line);
  };
  const tables: TableCheck[] = [];
  for (const table of DATA_TABLES) {
    const wanted = expected.rows[table];
    const stored = await readRows(client, table);
    const seen = new Map<string, number>();
    let duplicated = 0;
    let wrong = 0;
    for (const row of stored) {
      const key = naturalKeyOf(table, row.text);
      seen.set(key, (seen.get(key) ?? 0) + 1);
      const acceptable = wanted.get(key);
      if (acceptable === undefined) {
        duplicated += 1;
        note(`${table}: row ${key} (from ${row.sourcePartition}@${row.sourceOffset}) matches no produced message`);
        continue;
      }
      if ((seen.get(key) ?? 0) > 1) {
        duplicated += 1;
        note(`${table}: a second row for ${key}`);
        continue;
      }
      const lineage = acceptable.find((candidate) => candidate.partition === row.sourcePartition && candidate.offset === row.sourceOffset);
      if (lineage === undefined) {
        wrong += 1;
        const allowed = acceptable.map((candidate) => `${candidate.partition}@${candidate.offset}`).join(' or ');
        note(`${table}: ${key} stored from ${row.sourcePartition}@${row.sourceOffset}, expected from ${allowed}`);
        continue;
      }
      const differing = differingColumns(lineage.text, row.text);
      if (differing.length > 0) {
        wrong += 1;
        const first = differing[0] as string;
        note(
          `${table}: ${key} differs in ${differing.join(', ')} (${first}: expected ${JSON.stringify(lineage.text[first])?.slice(0, 80)}, found ${JSON.stringify(row.text[first])?.slice(0, 80)})`,
        );
      }
    }
    let lost = 0;
    for (const key of wanted.keys()) {
      if (!seen.has(key)) {
        lost += 1;
        note(`${table}: ${key} was produced but is not stored`);
      }
    }
    tables.push({ table, expected: wanted.size, found: stored.length, lost, duplicated, wrong });
  }

  const letters = await client.query<{ topic: string; partition: number; kafka_offset: string; reason: string; detail: string }>(
    'SELECT topic, partition, kafka_offset::text, reason, detail FROM dead_letter_events',
  );
  const found = new Set<string>();
  let dlqUnexpected = 0;
  let dlqWrong = 0;
  for (const letter of letters.rows) {
    const at = coordinate(letter.topic, letter.partition, letter.kafka_offset);
    const wanted = expected.deadLetters.get(at);
    if (wanted === undefined || found.has(at)) {
      dlqUnexpected += 1;
      note(`dead letter at ${at} (${letter.reason}: ${letter.detail.slice(0, 120)}) was not expected${found.has(at) ? ' twice' : ''}`);
    } else if (wanted.reason !== letter.reason || (wanted.detailIncludes !== undefined && !letter.detail.includes(wanted.detailIncludes))) {
      dlqWrong += 1;
      note(
        `dead letter at ${at}: ${letter.reason} (${letter.detail.slice(0, 120)}), expected ${wanted.reason}${wanted.detailIncludes ? ` naming ${wanted.detailIncludes}` : ''}`,
      );
    }
    found.add(at);
  }
  let dlqMissing = 0;
  for (const [at, wanted] of expected.deadLetters) {
    if (!found.has(at)) {
      dlqMissing += 1;
      note(`dead letter ${wanted.reason} expected at ${at} (plan ${wanted.planId}) is missing`);
    }
  }
  const sum = (field: 'lost' | 'duplicated' | 'wrong') => tables.reduce((total, table) => total + table[field], 0);
  return {
    tables,
    lost: sum('lost'),
    duplicated: sum('duplicated'),
    wrong: sum('wrong'),
    dlqExpected: expected.deadLetters.size,
    dlqFound: letters.rows.length,
    dlqMissing,
    dlqUnexpected,
    dlqWrong,
    examples,
  };
}

/** One partition whose group has not committed up to its end. */
export interface OffsetGap {
  readonly group: string;
  readonly topic: string;
  readonly partition: number;
  readonly committed: string;
  readonly end: string;
}

/** Every partition of every group's topic whose committed offset is not its high watermark. */
export async function checkCommittedOffsets(
  admin: Admin,
  groups: ReadonlyArray<{ group: string; topic: string }>,
): Promise<{ partitions: number; gaps: OffsetGap[] }> {
  const gaps: OffsetGap[] = [];
  let partitions = 0;
  for (const { group, topic } of groups) {
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    for (const end of ends) {
      partitions += 1;
      const offset = committed?.partitions.find((partition) => partition.partition === end.partition)?.offset ?? '-1';
      // An empty partition has nothing to commit: its end is 0 and no offset is stored (-1).
      const done = offset === end.high || (end.high === '0' && offset === '-1');
      if (!done) gaps.push({ group, topic, partition: end.partition, committed: offset, end: end.high });
    }
  }
  return { partitions, gaps };
}
