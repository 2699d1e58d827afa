/**
 * `npx tsx bench/upsert-shapes.ts`: which shape of the reviews upsert statement costs least, at
 * 50, 200 and 500 rows per batch, against COPY of the same rows in the same run (issue 11).
 *
 * Every shape writes the same decoded rows with the same SQL semantics (ON CONFLICT with the
 * reviews guard, RETURNING (xmax = 0)), one transaction per batch:
 *  - `unnest`: the production statement (one array parameter per column, named statement), with
 *    the guard's read-only pre-check;
 *  - `unnest-no-precheck`: the same without the pre-check (the guard alone decides);
 *  - `json`: one JSON parameter, `json_to_recordset`, with the pre-check;
 *  - `copy-temp`: COPY into a temporary table, then INSERT ... SELECT ... ON CONFLICT, with the
 *    pre-check (BEGIN, COPY, INSERT, COMMIT);
 *  - `copy`: the physical baseline, COPY into an identical table (no conflict handling).
 * Figures: fresh inserts and a full redelivery (every row refused by the guard), rows/s and x COPY,
 * medians over rounds.
 *
 * Flags: --records N (default 20000), --rounds N (default 3), --sizes 50,200,500.
 */
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import type pg from 'pg';
import { decodeReview } from '../shared/contracts/reviews.js';
import type { ReviewMessage } from '../shared/contracts/reviews.js';
import { createPool } from '../shared/db.js';
import type { BoundRow } from '../shared/pipeline-spec.js';
import { PIPELINES } from '../shared/pipelines.js';
import { loadSettings } from '../shared/settings.js';
import type { KafkaRecord } from '../shared/records.js';
import type { TableDescription } from '../shared/upsert.js';
import { upsertRows, upsertStatement } from '../shared/upsert.js';
import {
  APPS,
  COPY_COLUMNS,
  copyBaseline,
  copyLine,
  createCopyBaseline,
  median,
  prepareDatabase,
  syntheticReview,
  withDatabase,
} from './support.js';
import { pipeline as streamPipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
    sizes: { type: 'string', default: '50,200,500' },
  },
});
const RECORDS = Number(flags.records);
const ROUNDS = Number(flags.rounds);
const SIZES = flags.sizes.split(',').map(Number);

type Row = BoundRow<ReviewMessage>;
const table = PIPELINES.reviews.table;
const update = table.update as NonNullable<typeof table.update>;
const withoutPrecheck: TableDescription<Row> = { ...table, update: { columns: update.columns, where: update.where } };

const conflict = `ON CONFLICT (review_id) DO UPDATE SET ${update.columns.map((c) => `${c} = EXCLUDED.${c}`).join(', ')} WHERE ${update.where} RETURNING (xmax = 0) AS inserted`;
const names = table.columns.map((column) => column.name);
const jsonSql =
  `INSERT INTO reviews (${names.join(', ')}) SELECT ${names.map((n) => `input.${n}`).join(', ')} ` +
  `FROM json_to_recordset($1::json) AS input(${table.columns.map((c) => `${c.name} ${c.type}`).join(', ')}) ` +
  `WHERE ${update.keepWhere ?? 'true'} ${conflict}`;
const stageSql = `CREATE TEMP TABLE IF NOT EXISTS reviews_stage (${table.columns.map((c) => `${c.name} ${c.type}`).join(', ')}) ON COMMIT DELETE ROWS`;
const fromStageSql =
  `INSERT INTO reviews (${names.join(', ')}) SELECT ${names.map((n) => `input.${n}`).join(', ')} FROM reviews_stage AS input ` +
  `WHERE ${update.keepWhere ?? 'true'} ${conflict}`;

interface Batch {
  readonly rows: Row[];
  readonly copyText: string;
}

function batchesOf(size: number): Batch[] {
  const batches: Batch[] = [];
  for (let start = 0; start < RECORDS; start += size) {
    const rows: Row[] = [];
    const lines: string[] = [];
    for (let index = start; index < Math.min(RECORDS, start + size); index += 1) {
      const value = Buffer.from(JSON.stringify(syntheticReview(index)));
      const decoded = decodeReview(value);
      if (!decoded.ok) throw new Error(decoded.rejection.detail);
      const record: KafkaRecord = {
        topic: 'reviews',
        partition: index % 3,
        offset: index,
        timestamp: 0,
        timestampType: 'CREATE_TIME',
        key: null,
        value,
        headers: [],
      };
      rows.push({ message: decoded.message, applicationId: String(1 + (index % APPS)), record });
      lines.push(copyLine(decoded.message, 1 + (index % APPS), index % 3, index));
    }
    batches.push({ rows, copyText: `${lines.join('\n')}\n` });
  }
  return batches;
}

type Shape = (client: pg.PoolClient, batch: Batch) => Promise<void>;

const SHAPES: Record<string, Shape> = {
  unnest: async (client, batch) => void (await upsertRows(client, table, batch.rows)),
  'unnest-no-precheck': async (client, batch) => void (await upsertRows(client, withoutPrecheck, batch.rows)),
  json: async (client, batch) => {
    const objects = batch.rows.map((row) => Object.fromEntries(table.columns.map((c) => [c.name, c.value(row)])));
    await client.query({ name: 'bench_json_upsert', text: jsonSql, values: [JSON.stringify(objects)] });
  },
  'copy-temp': async (client, batch) => {
    await client.query('BEGIN');
    await client.query(stageSql);
    await streamPipeline(
      Readable.from([batch.copyText]),
      client.query(copyFrom(`COPY reviews_stage (${COPY_COLUMNS.join(', ')}) FROM STDIN`)),
    );
    await client.query({ name: 'bench_stage_upsert', text: fromStageSql, values: [] });
    await client.query('COMMIT');
  },
};

async function main(): Promise<void> {
  console.log(`upsert shapes: ${RECORDS} reviews per pass, batch sizes ${SIZES.join(', ')}, ${ROUNDS} rounds`);
  console.log(`production statement: ${upsertStatement(table)}`);
  await withDatabase('sc_bench_shapes', async (url) => {
    await prepareDatabase(url);
    const settings = loadSettings({ DATABASE_URL: url });
    const pool = createPool(settings.database, new Logger({ logLevel: 'WARN' }), 'bench', { max: 1 });
    const client = await pool.connect();
    await createCopyBaseline(client);
    const timed = async (work: () => Promise<void>) => {
      const started = performance.now();
      await work();
      return RECORDS / ((performance.now() - started) / 1000);
    };
    for (const size of SIZES) {
      const batches = batchesOf(size);
      const copyRates: number[] = [];
      const rates: Record<string, { fresh: number[]; redelivery: number[] }> = {};
      for (let round = 1; round <= ROUNDS; round += 1) {
        await client.query('TRUNCATE reviews_copy_baseline; CHECKPOINT');
        copyRates.push(
          await timed(() =>
            copyBaseline(
              client,
              batches.map((batch) => batch.copyText),
            ),
          ),
        );
        const order = Object.keys(SHAPES);
        for (let i = 0; i < round - 1; i += 1) order.push(order.shift() as string);
        for (const name of order) {
          const shape = SHAPES[name] as Shape;
          const figures = (rates[name] ??= { fresh: [], redelivery: [] });
          await client.query('TRUNCATE reviews; CHECKPOINT');
          figures.fresh.push(
            await timed(async () => {
              for (const batch of batches) await shape(client, batch);
            }),
          );
          const [count] = (await client.query<{ n: string }>('SELECT count(*) AS n FROM reviews')).rows;
          if (Number(count?.n) !== RECORDS) throw new Error(`${name} stored ${count?.n} of ${RECORDS} rows`);
          await client.query('CHECKPOINT');
          figures.redelivery.push(
            await timed(async () => {
              for (const batch of batches) await shape(client, batch);
            }),
          );
        }
      }
      const copy = median(copyRates);
      console.log(`batch ${size}: COPY ${copy.toFixed(0)} rows/s`);
      for (const [name, { fresh, redelivery }] of Object.entries(rates)) {
        const f = median(fresh);
        const r = median(redelivery);
        console.log(
          `  ${name.padEnd(20)} fresh ${f.toFixed(0).padStart(6)} rows/s (${(f / copy).toFixed(3)} x COPY), ` +
            `redelivery ${r.toFixed(0).padStart(6)} rows/s (${(r / copy).toFixed(3)} x COPY)`,
        );
      }
    }
    client.release();
    await pool.end();
  });
}

await main();
