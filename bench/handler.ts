/**
 * `npm run bench:handler`: the reviews handler against PostgreSQL's physical baseline.
 *
 * Synthetic Lambda events (reviews, 500 records each, realistic field sizes) go through the
 * real middy handler into a fresh database; in the same run the identical rows are COPYed
 * into an identical table (same columns, defaults, CHECKs, indexes and foreign key) in the
 * same 500-row transactions. Figures: fresh inserts, a full redelivery (every row skipped by
 * the guard), COPY, and the upsert statement alone on pre-decoded rows (which separates the
 * SQL's cost from decoding's); medians over rounds; ratios against COPY. The handler runs
 * twice per round, with STORAGE_DB_PREPARED_STATEMENTS off (the default: unnamed statements,
 * which every pooler passes) and on (named statements, planned once per connection), in
 * alternating order, so the setting's cost is measured in the same run. The last line is one
 * JSON object for tooling.
 *
 * Flags: --records N (default 200000), --rounds N (default 3), --batch N (default 500).
 */
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import pg from 'pg';
import { createPipelineHandler } from '../invoke/batch-handler.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import type { KafkaEvent } from '../shared/kafka-event.js';
import { decodeReview } from '../shared/contracts/reviews.js';
import type { ReviewMessage } from '../shared/contracts/reviews.js';
import type { BoundRow } from '../shared/pipeline-spec.js';
import { PIPELINES } from '../shared/pipelines.js';
import type { KafkaRecord } from '../shared/records.js';
import { upsertRows } from '../shared/upsert.js';
import { loadSettings } from '../shared/settings.js';
import {
  APPS,
  BENCH_CONTEXT,
  copyBaseline,
  copyLine,
  createCopyBaseline,
  median,
  prepareDatabase,
  serverUrl,
  syntheticReview,
  withDatabase,
} from './support.js';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '3' },
    batch: { type: 'string', default: '500' },
  },
});
const RECORDS = Number(flags.records);
const ROUNDS = Number(flags.rounds);
const BATCH = Number(flags.batch);
interface Batch {
  readonly event: KafkaEvent;
  readonly copyText: string;
  /** The same records decoded and bound, for the statement-only figure. */
  readonly rows: BoundRow<ReviewMessage>[];
}

function buildBatches(): Batch[] {
  const batches: Batch[] = [];
  for (let start = 0; start < RECORDS; start += BATCH) {
    const count = Math.min(BATCH, RECORDS - start);
    const partition = (start / BATCH) % 3;
    const records = [];
    const lines: string[] = [];
    const rows: BoundRow<ReviewMessage>[] = [];
    for (let i = 0; i < count; i += 1) {
      const index = start + i;
      const value = Buffer.from(JSON.stringify(syntheticReview(index)));
      records.push({ topic: 'reviews', partition, offset: index, timestamp: Date.now(), key: null, value });
      // The baseline stores exactly what the decoder produced (same normalised values).
      const decoded = decodeReview(value);
      if (!decoded.ok) throw new Error(`synthetic review ${index} does not decode: ${decoded.rejection.detail}`);
      const message: ReviewMessage = decoded.message;
      const applicationId = 1 + (index % APPS);
      lines.push(copyLine(message, applicationId, partition, index));
      rows.push({ message, applicationId: String(applicationId), record: records[i] as KafkaRecord });
    }
    batches.push({ event: buildKafkaEvent(records), copyText: `${lines.join('\n')}\n`, rows });
  }
  return batches;
}

/** Median over rounds of `on[i] / off[i]`. */
function pairedGain(on: readonly number[], off: readonly number[]): number {
  return median(on.map((rate, round) => rate / (off[round] as number)));
}

async function timed(work: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await work();
  return (performance.now() - started) / 1000;
}

async function main(): Promise<void> {
  console.log(
    `bench:handler: ${RECORDS} reviews in batches of ${BATCH}, ${ROUNDS} rounds, against ${serverUrl().replace(/\/\/[^@]*@/, '//')}`,
  );
  const batches = buildBatches();
  await withDatabase('sc_bench_handler', async (url) => {
    await prepareDatabase(url);
    const admin = new pg.Pool({ connectionString: url, max: 2 });
    // The physical baseline: an identical table, same defaults, CHECKs, indexes and foreign key.
    await createCopyBaseline(admin);

    const handlerWith = (prepared: boolean) =>
      createPipelineHandler('reviews', {
        settings: loadSettings({ DATABASE_URL: url, STORAGE_DB_PREPARED_STATEMENTS: String(prepared) }),
        logger: new Logger({ serviceName: 'storage-consumer-bench', logLevel: 'WARN' }),
      });
    const handler = handlerWith(false);
    const preparedHandler = handlerWith(true);
    const context = BENCH_CONTEXT;
    const copyClient = await admin.connect();

    const copyTexts = batches.map((batch) => batch.copyText);
    const copyAll = () => copyBaseline(copyClient, copyTexts);
    // The upsert statement alone on pre-decoded rows: what the SQL costs without decoding. It is
    // the statement the handler sends on a fresh pass: without the stale-row pre-check, which
    // the pipeline runs only while its table declines rows (PrecheckSwitch).
    const statementAll = async () => {
      for (const batch of batches) await upsertRows(copyClient, PIPELINES.reviews.table, batch.rows, { precheck: false });
    };
    const handleAll = async (expect: 'inserted' | 'skipped', through = handler) => {
      let rows = 0;
      for (const batch of batches) {
        const response = await through(batch.event, context);
        if (response.batchItemFailures.length > 0) throw new Error('a benchmark batch failed');
        rows += Object.values(batch.event.records).reduce((sum, list) => sum + list.length, 0);
      }
      const [counted] = (await admin.query<{ n: string }>('SELECT count(*) AS n FROM reviews')).rows;
      if (Number(counted?.n) !== RECORDS) throw new Error(`expected ${RECORDS} rows after the ${expect} pass, found ${counted?.n}`);
      return rows;
    };

    const copyRates: number[] = [];
    const freshRates: number[] = [];
    const statementRates: number[] = [];
    const redeliveryRates: number[] = [];
    const preparedFreshRates: number[] = [];
    const preparedRedeliveryRates: number[] = [];
    const preparedPasses = async () => {
      await admin.query('TRUNCATE reviews; CHECKPOINT');
      preparedFreshRates.push(RECORDS / (await timed(async () => void (await handleAll('inserted', preparedHandler)))));
      await admin.query('CHECKPOINT');
      preparedRedeliveryRates.push(RECORDS / (await timed(async () => void (await handleAll('skipped', preparedHandler)))));
    };
    for (let round = 1; round <= ROUNDS; round += 1) {
      await admin.query('TRUNCATE reviews, reviews_copy_baseline; CHECKPOINT');
      // Alternate which goes first, so neither always meets a warmer cache.
      const copyFirst = round % 2 === 1;
      if (copyFirst) copyRates.push(RECORDS / (await timed(copyAll)));
      await admin.query('CHECKPOINT');
      statementRates.push(RECORDS / (await timed(statementAll)));
      if (!copyFirst) await preparedPasses();
      await admin.query('TRUNCATE reviews; CHECKPOINT');
      freshRates.push(RECORDS / (await timed(async () => void (await handleAll('inserted')))));
      await admin.query('CHECKPOINT');
      redeliveryRates.push(RECORDS / (await timed(async () => void (await handleAll('skipped')))));
      if (copyFirst) await preparedPasses();
      if (!copyFirst) {
        await admin.query('CHECKPOINT');
        copyRates.push(RECORDS / (await timed(copyAll)));
      }
      console.log(
        `round ${round}: copy ${copyRates.at(-1)?.toFixed(0)} rows/s, statement only ${statementRates.at(-1)?.toFixed(0)} rows/s, fresh ${freshRates.at(-1)?.toFixed(0)} rows/s, redelivery ${redeliveryRates.at(-1)?.toFixed(0)} rows/s; ` +
          `prepared statements on: fresh ${preparedFreshRates.at(-1)?.toFixed(0)} rows/s, redelivery ${preparedRedeliveryRates.at(-1)?.toFixed(0)} rows/s`,
      );
    }
    copyClient.release();
    await handler.close();
    await preparedHandler.close();
    await admin.end();

    const copy = median(copyRates);
    const fresh = median(freshRates);
    const statement = median(statementRates);
    const redelivery = median(redeliveryRates);
    const preparedFresh = median(preparedFreshRates);
    const preparedRedelivery = median(preparedRedeliveryRates);
    const figures = {
      records: RECORDS,
      batch_size: BATCH,
      rounds: ROUNDS,
      copy_rows_per_s: Math.round(copy),
      fresh_rows_per_s: Math.round(fresh),
      redelivery_rows_per_s: Math.round(redelivery),
      fresh_ratio: Number((fresh / copy).toFixed(3)),
      statement_rows_per_s: Math.round(statement),
      statement_ratio: Number((statement / copy).toFixed(3)),
      redelivery_ratio: Number((redelivery / copy).toFixed(3)),
      prepared_fresh_rows_per_s: Math.round(preparedFresh),
      prepared_redelivery_rows_per_s: Math.round(preparedRedelivery),
      // What STORAGE_DB_PREPARED_STATEMENTS=true gains over the default (> 1: faster): the
      // median of each round's on/off ratio (the two passes of a round run back to back, so a
      // noisy neighbour slows both).
      prepared_fresh_gain: Number(pairedGain(preparedFreshRates, freshRates).toFixed(3)),
      prepared_redelivery_gain: Number(pairedGain(preparedRedeliveryRates, redeliveryRates).toFixed(3)),
    };
    console.log(`median copy:        ${figures.copy_rows_per_s} rows/s`);
    console.log(
      `median statement:   ${figures.statement_rows_per_s} rows/s (${figures.statement_ratio} x COPY: the upsert alone on decoded rows)`,
    );
    console.log(`median fresh:       ${figures.fresh_rows_per_s} rows/s (${figures.fresh_ratio} x COPY; target >= 0.7)`);
    console.log(`median redelivery:  ${figures.redelivery_rows_per_s} rows/s (${figures.redelivery_ratio} x COPY; target >= 1.5)`);
    console.log(
      `prepared statements on: fresh ${figures.prepared_fresh_rows_per_s} rows/s (median of per-round ratios ${figures.prepared_fresh_gain} x off), ` +
        `redelivery ${figures.prepared_redelivery_rows_per_s} rows/s (${figures.prepared_redelivery_gain} x off)`,
    );
    console.log(JSON.stringify(figures));
  });
}

await main();
