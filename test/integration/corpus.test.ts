import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readRows } from '../../chaos/stored-rows.js';
import type { DataTable, StoredRow } from '../../chaos/stored-rows.js';
import type { RowText } from '../../fixtures/row-text.js';
import { DEAD_LETTER_PAYLOAD_LIMIT } from '../../shared/dead-letters.js';
import { buildKafkaEvent } from '../../shared/kafka-event-builder.js';
import type { KafkaEvent } from '../../shared/kafka-event.js';
import { createPipelineHandler } from '../../invoke/batch-handler.js';
import type { BatchReport } from '../../shared/batch-report.js';
import { PIPELINES, PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { CORPUS, CORPUS_APPS, CORPUS_PIPELINES, goodNeighbour } from '../../fixtures/corpus.js';
import type { CorpusCase } from '../../fixtures/corpus.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema } from '../helpers/database.js';
import { lambdaContext, testSettings } from '../helpers/lambda-events.js';

// The hostile corpus through the real handler and PostgreSQL, in batches mixed with good
// messages: every outcome as listed, every neighbour stored, no batch ever failing or retried.

const TABLES = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].table.name])) as Record<PipelineName, DataTable>;
/** Corpus cases per batch (plus one good neighbour after every second case). */
const CASES_PER_BATCH = 12;

interface Placed {
  readonly partition: number;
  readonly offset: number;
  readonly value: Buffer | null;
}
interface Neighbour extends Placed {
  readonly row: RowText;
}

let schema: TestSchema;
const placed = new Map<CorpusCase, Placed>();
for (const name of PIPELINE_NAMES.filter((candidate) => !CORPUS_PIPELINES.includes(candidate))) {
  it.todo(`${name}: no hostile-corpus cases in fixtures/corpus.ts`);
}
const neighbours = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, []])) as unknown as Record<PipelineName, Neighbour[]>;
const events: Array<{ topic: PipelineName; event: KafkaEvent }> = [];
const reports: BatchReport[] = [];
const handlers: Array<ReturnType<typeof createPipelineHandler>> = [];
const logger = new Logger({ serviceName: 'corpus-test', logLevel: 'SILENT' });
const warnings = vi.spyOn(logger, 'warn');
const errors = vi.spyOn(logger, 'error');

/** Cuts a topic's cases into batches: a group stays together, `later` groups come last. */
function batchesOf(topic: PipelineName): CorpusCase[][] {
  const mine = CORPUS.filter((corpusCase) => corpusCase.topic === topic);
  const units: CorpusCase[][] = [];
  for (const corpusCase of mine) {
    const unit = corpusCase.group ? units.find((existing) => existing[0]?.group === corpusCase.group) : undefined;
    if (unit) unit.push(corpusCase);
    else units.push([corpusCase]);
  }
  const batches: CorpusCase[][] = [];
  let current: CorpusCase[] = [];
  for (const unit of units.filter((candidate) => !candidate[0]?.later)) {
    if (current.length + unit.length > CASES_PER_BATCH && current.length > 0) {
      batches.push(current);
      current = [];
    }
    current.push(...unit);
  }
  if (current.length > 0) batches.push(current);
  for (const unit of units.filter((candidate) => candidate[0]?.later)) batches.push(unit);
  return batches;
}

function buildEvents(): void {
  for (const topic of CORPUS_PIPELINES) {
    const nextOffset = [0, 0, 0];
    for (const batch of batchesOf(topic)) {
      const records: Array<Placed & { key: string }> = [];
      batch.forEach((corpusCase, index) => {
        const offset = nextOffset[corpusCase.partition]!++;
        const record = { partition: corpusCase.partition, offset, value: corpusCase.value, key: corpusCase.name };
        placed.set(corpusCase, record);
        records.push(record);
        if (index % 2 === 1) {
          const good = goodNeighbour(topic, neighbours[topic].length + 1);
          const partition = neighbours[topic].length % 3;
          const neighbour = { partition, offset: nextOffset[partition]!++, value: good.value, row: good.row };
          neighbours[topic].push(neighbour);
          records.push({ ...neighbour, key: 'neighbour' });
        }
      });
      // Lambda groups an event by partition; in-batch duplicates are listed in partition order.
      records.sort((left, right) => left.partition - right.partition);
      const event = buildKafkaEvent(
        records.map((record) => ({ topic, ...record, key: Buffer.from(record.key), timestamp: Date.parse('2026-11-30T06:00:00Z') })),
      );
      events.push({ topic, event });
    }
  }
}

async function sendAll(): Promise<void> {
  const byTopic = new Map(handlers.map((handler, index) => [CORPUS_PIPELINES[index], handler]));
  for (const { topic, event } of events) {
    const response = await byTopic.get(topic)!(event, lambdaContext());
    expect(response).toEqual({ batchItemFailures: [] });
  }
}

/** Whether a detail names `field` first: `score: ...`, `protocols["..."]: ...`, `histogram[2]: ...`. */
function namesField(detail: string, field: string): boolean {
  return detail.startsWith(field) && /^(: |\[|\.)/.test(detail.slice(field.length));
}

function sameBytes(stored: Buffer | null | undefined, expected: Buffer | null | undefined): boolean {
  if (stored === null || stored === undefined || expected === null || expected === undefined)
    return (stored ?? null) === (expected ?? null);
  return stored.equals(expected);
}

async function rowsAt(topic: PipelineName, partition: number, offset: number): Promise<StoredRow[]> {
  return readRows(schema.pool, TABLES[topic], 'source_partition = $1 AND source_offset = $2', [partition, offset]);
}

async function lettersAt(topic: PipelineName, partition: number, offset: number) {
  const result = await schema.pool.query<{ reason: string; detail: string; payload: Buffer | null; payload_size: number }>(
    'SELECT reason, detail, payload, payload_size FROM dead_letter_events WHERE topic = $1 AND partition = $2 AND kafka_offset = $3',
    [topic, partition, offset],
  );
  return result.rows;
}

async function snapshot(): Promise<string> {
  const tables = await Promise.all(Object.values(TABLES).map((table) => readRows(schema.pool, table)));
  const letters = await schema.pool.query(
    'SELECT topic, partition, kafka_offset, reason, detail, payload_sha256 FROM dead_letter_events ORDER BY 1, 2, 3',
  );
  const sorted = tables.map((rows) => rows.map((row) => JSON.stringify(row)).sort());
  return JSON.stringify({ sorted, letters: letters.rows });
}

beforeAll(async () => {
  schema = await createMigratedSchema(CORPUS_APPS, 'corpus');
  const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
    throw new Error(`the handler tried to exit the process (code ${String(code)})`);
  });
  try {
    const settings = testSettings(schema.url);
    for (const name of CORPUS_PIPELINES) {
      handlers.push(createPipelineHandler(name, { settings, logger, onBatch: (report) => reports.push(report) }));
    }
    buildEvents();
    await sendAll();
  } finally {
    exit.mockRestore();
  }
});

afterAll(async () => {
  await Promise.all(handlers.map((handler) => handler.close()));
  await schema?.drop();
});

describe('the hostile corpus', () => {
  it('has at least 50 distinct cases covering every reason and outcome', () => {
    expect(new Set(CORPUS.map((corpusCase) => corpusCase.name)).size).toBe(CORPUS.length);
    expect(CORPUS.length).toBeGreaterThanOrEqual(50);
    const reasons = new Set(CORPUS.flatMap((corpusCase) => (corpusCase.expect.kind === 'dead_letter' ? [corpusCase.expect.reason] : [])));
    expect([...reasons].sort()).toEqual(['empty_message', 'invalid_encoding', 'invalid_json', 'invalid_message', 'unknown_application']);
    expect(new Set(CORPUS.map((corpusCase) => corpusCase.expect.kind))).toEqual(new Set(['dead_letter', 'stored', 'superseded']));
  });

  it('committed every batch in one attempt, never isolating a row, never exiting', () => {
    expect(reports).toHaveLength(events.length);
    for (const report of reports) {
      expect(report).toMatchObject({ failed: false, attempts: 1 });
      expect(
        report.inserted + report.updated + report.skipped + report.deduplicated + report.deadLettered + report.alreadyDeadLettered,
      ).toBe(report.records);
    }
    // Rejections are logged as warnings; a row the database refused would be isolated with this one.
    expect(warnings.mock.calls.filter(([message]) => String(message).includes('isolating'))).toEqual([]);
    expect(errors).not.toHaveBeenCalled();
  });

  it.each(CORPUS.map((corpusCase) => [corpusCase.name, corpusCase] as const))('%s', async (_name, corpusCase) => {
    const { partition, offset, value } = placed.get(corpusCase)!;
    const rows = await rowsAt(corpusCase.topic, partition, offset);
    const letters = await lettersAt(corpusCase.topic, partition, offset);
    const outcome = corpusCase.expect;
    switch (outcome.kind) {
      case 'stored':
        expect(letters).toEqual([]);
        expect(rows.map((row) => row.text)).toEqual([outcome.row]);
        break;
      case 'superseded':
        expect(letters).toEqual([]);
        expect(rows).toEqual([]);
        break;
      case 'dead_letter': {
        expect(rows).toEqual([]);
        expect(letters).toHaveLength(1);
        const [letter] = letters;
        expect(letter?.reason).toBe(outcome.reason);
        if (outcome.field !== undefined) expect(namesField(letter?.detail ?? '', outcome.field), letter?.detail).toBe(true);
        expect(letter?.payload_size).toBe(value?.length ?? 0);
        if (outcome.truncated) {
          expect(sameBytes(letter?.payload, value?.subarray(0, DEAD_LETTER_PAYLOAD_LIMIT))).toBe(true);
          expect(letter?.detail).toContain(`truncated to ${DEAD_LETTER_PAYLOAD_LIMIT} of ${value?.length} bytes`);
        } else {
          expect(sameBytes(letter?.payload, value)).toBe(true);
        }
        break;
      }
    }
  });

  it('stored every good neighbour exactly', async () => {
    for (const topic of CORPUS_PIPELINES) {
      expect(neighbours[topic].length).toBeGreaterThan(0);
      for (const neighbour of neighbours[topic]) {
        const rows = await rowsAt(topic, neighbour.partition, neighbour.offset);
        expect(rows.map((row) => row.text)).toEqual([neighbour.row]);
      }
    }
  });

  it('holds nothing beyond the expected rows and dead letters', async () => {
    for (const topic of CORPUS_PIPELINES) {
      const expectedRows =
        CORPUS.filter((corpusCase) => corpusCase.topic === topic && corpusCase.expect.kind === 'stored').length + neighbours[topic].length;
      expect(await readRows(schema.pool, TABLES[topic])).toHaveLength(expectedRows);
    }
    const letters = await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM dead_letter_events');
    expect(Number(letters.rows[0]?.n)).toBe(CORPUS.filter((corpusCase) => corpusCase.expect.kind === 'dead_letter').length);
  });

  it('changes nothing when every batch is redelivered', async () => {
    const before = await snapshot();
    const count = reports.length;
    await sendAll();
    expect(await snapshot()).toBe(before);
    for (const report of reports.slice(count)) expect(report).toMatchObject({ inserted: 0, updated: 0, failed: false });
  });
});
