import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline as streamPipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Context } from 'aws-lambda';
import type { ReviewMessage } from '../shared/contracts/reviews.js';
import { PIPELINES } from '../shared/pipelines.js';
import { CLIENT_NAMES } from '../kafka/port.js';
import type { KafkaClientName } from '../kafka/port.js';

/** The package root (the benches run npm and the host from there). */
export const BENCH_ROOT = path.resolve(import.meta.dirname, '..');

/** The host as the benches run it by default: the build's entry, as the Dockerfile and `npm run host` run it. */
export const BUILT_HOST_ENTRY = 'dist/host/main.js';

/**
 * The Node flags the host runs with (the Dockerfile's ENTRYPOINT, `npm run host`, `npm start`):
 * the benches run it the same way, and test/unit/deploy/host-node-flags.test.ts holds the three
 * places to this list. Why these: docs/design.md, "Memory".
 */
export const HOST_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=150'];

/**
 * The Kafka clients the host can run on (`KAFKA_CLIENT`, kafka/port.ts, docs/design.md "The
 * Kafka seam"); the first is the default. The benches measure our host on each one asked for,
 * side by side in one run.
 */
export const HOST_KAFKA_CLIENTS = CLIENT_NAMES;

/** One of {@link HOST_KAFKA_CLIENTS}. */
export type HostKafkaClient = KafkaClientName;

/** A bench's `--clients` value (a comma list, each at most once) as the clients to measure. */
export function parseClients(text: string): HostKafkaClient[] {
  const names = text.split(',').map((name) => name.trim());
  for (const name of names)
    if (!(HOST_KAFKA_CLIENTS as readonly string[]).includes(name))
      throw new Error(`--clients takes a comma list of ${HOST_KAFKA_CLIENTS.join(', ')}, not ${name}`);
  if (new Set(names).size !== names.length) throw new Error(`--clients names a client twice: ${text}`);
  return names as HostKafkaClient[];
}

/**
 * A bench's `--host-env NAME=VALUE` pairs as the extra environment of our host. The client is not
 * among them: `--clients` sets `KAFKA_CLIENT` per run.
 */
export function parseHostEnv(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`--host-env takes NAME=VALUE, not ${pair}`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  if ('KAFKA_CLIENT' in env) throw new Error('--host-env KAFKA_CLIENT: name the clients with --clients');
  return env;
}

/**
 * The order of one round of alternated runs: `members` turned by one place per round, so over as
 * many rounds as there are members each one runs once in every position (with two members: A B,
 * B A, A B, ...). Rounds count from 1.
 */
export function rotation<T>(members: readonly T[], round: number): T[] {
  const turn = (round - 1) % members.length;
  return [...members.slice(turn), ...members.slice(0, turn)];
}

/** Runs `npm <args>` in the package root; rejects unless it exits 0. */
export function runNpm(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', args, { cwd: BENCH_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`npm ${args.join(' ')} exited with ${code}`))));
  });
}

/** The server benchmarks use: `DATABASE_URL`, else the machine's PostgreSQL. */
export function serverUrl(): string {
  return process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}

/** Median of a non-empty list (the machines are noisy: never quote a mean or a best). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Percentile (nearest rank) of a list. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/** Runs `work` against a fresh database on the server and drops it afterwards, whatever happens. */
export async function withDatabase<T>(prefix: string, work: (url: string) => Promise<T>): Promise<T> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  try {
    return await work(url.toString());
  } finally {
    const cleanup = new pg.Client({ connectionString: serverUrl() });
    await cleanup.connect();
    await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await cleanup.end();
  }
}

/** Apps the synthetic data spreads over: `com.example.app0` .. `com.example.app49`, ids 1..50. */
export const APPS = 50;

const WORDS = 'the app works well but crashes when I open the settings page after update forecast widget battery'.split(' ');

function sentence(seed: number, length: number): string {
  let text = '';
  for (let i = 0; text.length < length; i += 1) text += `${WORDS[(seed * 7 + i * 13) % WORDS.length]} `;
  return text.slice(0, length).trim();
}

/** One realistic review: ~40-character id, short name, 60-400 characters of text, a reply now and then. */
export function syntheticReview(index: number): Record<string, unknown> {
  const replied = index % 5 === 0;
  return {
    review_id: `gp:AOqpTO${index.toString(36).padStart(8, '0')}${randomBytes(12).toString('base64url')}`,
    package_name: `com.example.app${index % APPS}`,
    user_name: `User ${index % 9973}`,
    content: sentence(index, 60 + (index % 340)),
    score: 1 + (index % 5),
    thumbs_up_count: index % 1000,
    review_created_version: '7.4.0',
    app_version: '7.4.1',
    reviewed_at: '2026-11-28T19:44:02',
    reply_content: replied ? sentence(index + 1, 120) : null,
    replied_at: replied ? '2026-11-29T08:00:00Z' : null,
    last_synced_at: `2026-11-30T06:${String(Math.floor(index / 60000) % 60).padStart(2, '0')}:11.480113Z`,
  };
}

/** DEV stand-in of the App API table with the synthetic apps, then the migrations. */
export async function prepareDatabase(url: string): Promise<void> {
  const { runMigrations } = await import('../shared/migrations/run.js');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(await readFile(new URL('../dev/app-api-stand-in.sql', import.meta.url), 'utf8'));
    await client.query(
      `INSERT INTO apps_registry_application (id, package_name, is_active)
       SELECT i, 'com.example.app' || (i - 1), true FROM generate_series(1, ${APPS}) AS i ON CONFLICT DO NOTHING`,
    );
  } finally {
    await client.end();
  }
  await runMigrations({ connection: { connectionString: url }, logger: { info: () => undefined, warn: () => undefined } });
}

/** The columns the COPY baseline fills: every column the reviews upsert writes (its spec's, in order). */
export const COPY_COLUMNS: readonly string[] = PIPELINES.reviews.table.columns.map((column) => column.name);

/** The Lambda context the benchmarks invoke handlers with (a generous time budget). */
export const BENCH_CONTEXT: Context = {
  callbackWaitsForEmptyEventLoop: false,
  functionName: 'bench',
  functionVersion: '1',
  invokedFunctionArn: 'arn:bench',
  memoryLimitInMB: '1024',
  awsRequestId: 'bench',
  logGroupName: 'bench',
  logStreamName: 'bench',
  getRemainingTimeInMillis: () => 900_000,
  done: () => undefined,
  fail: () => undefined,
  succeed: () => undefined,
};

/** COPY text-format escaping. */
function copyValue(value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  return String(value).replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

/** One COPY text line for a decoded review (the baseline stores exactly what the decoder produced). */
export function copyLine(message: ReviewMessage, applicationId: number, partition: number, offset: number): string {
  return [
    message.review_id,
    applicationId,
    message.user_name,
    message.content,
    message.score,
    message.thumbs_up_count,
    message.review_created_version,
    message.app_version,
    message.reviewed_at,
    message.reply_content,
    message.replied_at,
    message.last_synced_at,
    partition,
    offset,
  ]
    .map(copyValue)
    .join('\t');
}

/**
 * PostgreSQL's physical baseline: `reviews_copy_baseline`, identical to `reviews` (same columns,
 * defaults, CHECKs, indexes and foreign key).
 */
export async function createCopyBaseline(client: pg.ClientBase | pg.Pool): Promise<void> {
  await client.query(`CREATE TABLE reviews_copy_baseline (LIKE reviews INCLUDING ALL);
    ALTER TABLE reviews_copy_baseline ADD FOREIGN KEY (application_id) REFERENCES apps_registry_application (id)`);
}

/** COPYs `lines` into the baseline table, one transaction per chunk of lines (a pipeline batch). */
export async function copyBaseline(client: pg.ClientBase, chunks: readonly string[]): Promise<void> {
  for (const text of chunks) {
    await client.query('BEGIN');
    await streamPipeline(
      Readable.from([text]),
      client.query(copyFrom(`COPY reviews_copy_baseline (${COPY_COLUMNS.join(', ')}) FROM STDIN`)),
    );
    await client.query('COMMIT');
  }
}
