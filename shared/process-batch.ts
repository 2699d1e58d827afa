/**
 * The batch flow both runtimes run (SPEC.md section 3): parse the event, decode every record,
 * then in one transaction retried on transient errors resolve the apps, dedupe, write dead
 * letters and upsert the rows, commit, and only then report success (or the partial batch
 * response naming what to redeliver).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { BatchReport, BatchResponse } from './batch-report.js';
import { batchLogFields, batchPlaceFields } from './batch-report.js';
import type { DecodeResult } from './contracts/decoder.js';
import type { DeadLetter } from './dead-letters.js';
import { insertDeadLetters, lettersStoredBy } from './dead-letters.js';
import { dedupeByKey } from './dedupe.js';
import { attemptTimeNeededMs, beginBatchTransaction, HAND_BACK_MARGIN_MS, withClient } from './connection.js';
import { isRefusedDataError } from './error-classification.js';
import { loggedError, RetryBudgetExhaustedError } from './errors.js';
import { offsetRanges, parseKafkaEvent } from './kafka-event.js';
import type { RecordDelays } from './record-delay.js';
import { NO_RECORD_DELAYS, recordDelays } from './record-delay.js';
import type { BoundRow, PipelineDefinition } from './pipeline-spec.js';
import type { PipelineName } from './pipelines.js';
import type { ApplicationIds } from './resolver.js';
import { withTransientRetry } from './retry.js';
import type { PipelineRuntime } from './runtime.js';
import type { Queryable } from './queryable.js';
import type { KafkaRecord, WriteOutcome } from './records.js';
import type { UpsertOptions } from './upsert.js';
import { upsertRows, upsertRowsIsolating } from './upsert.js';
import { logRejections } from './rejection-log.js';

/** The invocation's clock: Lambda's `context.getRemainingTimeInMillis()` or the host's deadline. */
export interface Invocation {
  readonly remainingMs: () => number;
  /**
   * Called when the batch is about to wait before a retry: the host records the retry, its number
   * and error, on the batch in flight of each partition. The consumer group is not heartbeated
   * from here: a timer in host/topic-consumer.ts heartbeats it for as long as the invocation runs.
   */
  readonly onWait?: (retry: BatchRetry) => void;
}

/** One transient failure of a batch's database attempt, about to be retried in the same invocation. */
export interface BatchRetry {
  /** The attempt that failed: 1 for the first. */
  readonly attempt: number;
  readonly error: unknown;
  /** The partitions of the batch's records. */
  readonly partitions: readonly number[];
}

/** What a caller may add to a batch (the dead-letter re-drive marks its letters here). */
export interface BatchOptions {
  /**
   * Runs inside the batch's transaction after the dead letters and rows were written and
   * before COMMIT, with every dead letter of this attempt (new or already stored); a throw
   * rolls the whole batch back. Runs again on each retried attempt.
   */
  readonly beforeCommit?: (client: Queryable, letters: readonly DeadLetter[]) => Promise<void>;
}

/** What the flow needs of any pipeline's message: the app it belongs to. */
type Message = { readonly package_name: string };

/** A decoded message with the record it came from. */
interface Decoded<M> {
  readonly record: KafkaRecord;
  readonly message: M;
}

/** What every attempt of one batch writes: decoded messages and the decoder's rejections. */
interface Batch<M extends Message> {
  readonly runtime: PipelineRuntime;
  readonly definition: PipelineDefinition<M, PipelineName>;
  readonly messages: readonly Decoded<M>[];
  readonly rejections: readonly DeadLetter[];
  readonly beforeCommit: BatchOptions['beforeCommit'];
  /** Stored on the dead letters this invocation writes, so every attempt knows which are its own. */
  readonly invocationId: string;
}

interface Written extends WriteOutcome {
  readonly deduplicated: number;
  /** Every dead letter of the batch, new or already stored. */
  readonly letters: readonly DeadLetter[];
  /**
   * The ones this invocation stored: in this attempt, or in an earlier one whose COMMIT was
   * applied though its acknowledgement was lost. The rest were stored before (a replay).
   */
  readonly storedLetters: readonly DeadLetter[];
  /** When COMMIT returned (epoch ms): the moment the batch's rows became visible. */
  readonly committedAt: number;
}

/**
 * Decodes every record; a record the envelope already ruled out, or its decoder refuses,
 * becomes a dead letter. `reconcile` (cli/reconcile.ts) decodes with it too, so it expects of
 * each record exactly what a batch made of it.
 */
export function decodeAll<M extends Message>(
  definition: PipelineDefinition<M, PipelineName>,
  records: readonly KafkaRecord[],
): { messages: Decoded<M>[]; rejections: DeadLetter[] } {
  const messages: Decoded<M>[] = [];
  const rejections: DeadLetter[] = [];
  for (const record of records) {
    const result: DecodeResult<M> = record.rejection ? { ok: false, rejection: record.rejection } : definition.decode(record.value);
    if (result.ok) messages.push({ record, message: result.message });
    else rejections.push({ pipeline: definition.name, record, rejection: result.rejection });
  }
  return { messages, rejections };
}

/**
 * Binds each message to its application id: a table row, or an `unknown_application` dead
 * letter when its `package_name` is not registered (also `reconcile`'s, like {@link decodeAll}).
 */
export function bindApplications<M extends Message>(
  pipeline: PipelineName,
  messages: readonly Decoded<M>[],
  applications: ApplicationIds,
): { bound: BoundRow<M>[]; letters: DeadLetter[] } {
  const bound: BoundRow<M>[] = [];
  const letters: DeadLetter[] = [];
  for (const { record, message } of messages) {
    const applicationId = applications.get(message.package_name);
    if (applicationId === undefined) {
      letters.push({
        pipeline,
        record,
        rejection: { reason: 'unknown_application', detail: `package_name ${JSON.stringify(message.package_name)} is not registered` },
      });
    } else bound.push({ message, applicationId, record });
  }
  return { bound, letters };
}

/** How one attempt writes its rows; `refused` are rows the database refused, as dead letters. */
type RowWrite = <M extends Message>(
  client: pg.PoolClient,
  definition: PipelineDefinition<M, PipelineName>,
  rows: readonly BoundRow<M>[],
  options: UpsertOptions,
) => Promise<{ outcome: WriteOutcome; refused: readonly DeadLetter[] }>;

const NONE_REFUSED: readonly DeadLetter[] = [];

/** The common path: all rows in one statement; a refused row aborts the attempt. */
const upsertAll: RowWrite = async (client, definition, rows, options) => ({
  outcome: await upsertRows(client, definition.table, rows, options),
  refused: NONE_REFUSED,
});

/**
 * After a refusal: the rows are bisected under savepoints and each row the database refuses
 * is dead-lettered as `rejected_by_database`.
 */
const upsertIsolatingRefused: RowWrite = async (client, definition, rows, options) => {
  const { outcome, refused } = await upsertRowsIsolating(client, definition.table, rows, options);
  return {
    outcome,
    refused: refused.map(({ row, error }) => ({
      pipeline: definition.name,
      record: row.record,
      rejection: { reason: 'rejected_by_database', detail: `SQLSTATE ${error.code ?? '?'}: ${error.message}` },
    })),
  };
};

/**
 * One transaction attempt on one connection: open the batch transaction (its timeouts and
 * time zone set inside it, so a pooler passes them), resolve, bind, dedupe, then dead letters
 * and rows (written by `writeRows`), `beforeCommit`, COMMIT.
 */
async function writeBatch<M extends Message>(client: pg.PoolClient, batch: Batch<M>, writeRows: RowWrite): Promise<Written> {
  const { runtime, definition, messages } = batch;
  const database = runtime.settings.database;
  const sent = { prepared: database.preparedStatements };
  const written = { ...sent, invocationId: batch.invocationId };
  await beginBatchTransaction(client, database);
  try {
    const applications = await runtime.resolver.resolve(
      client,
      messages.map((decoded) => decoded.message.package_name),
    );
    const { bound, letters: unknown } = bindApplications(definition.name, messages, applications);
    const { kept, dropped } = dedupeByKey(bound, definition.naturalKey, definition.prefer);
    const letters = [...batch.rejections, ...unknown];
    let inserted = await insertDeadLetters(client, letters, written);
    const { outcome, refused } = await writeRows(client, definition, kept, { ...sent, precheck: runtime.precheck.enabled });
    if (refused.length > 0) {
      inserted += await insertDeadLetters(client, refused, written);
      letters.push(...refused);
    }
    // Some conflicted: stored by an earlier invocation (a replay), or by an earlier attempt of
    // this one whose COMMIT acknowledgement was lost; the invocation id tells them apart.
    const storedLetters = inserted === letters.length ? letters : await lettersStoredBy(client, letters, batch.invocationId);
    await batch.beforeCommit?.(client, letters);
    await client.query('COMMIT');
    const committedAt = Date.now();
    runtime.precheck.observe(outcome);
    return { ...outcome, deduplicated: dropped, letters, storedLetters, committedAt };
  } catch (error) {
    // Only the refused-rows path reuses this connection: roll back there. After any other
    // error `withClient` destroys the connection, and a ROLLBACK on a connection that stopped
    // answering would cost one more query timeout before that.
    if (isRefusedDataError(error)) await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Writes the batch on `client`: with one statement for all rows, and when the database
 * refuses a row the decoder accepted (SQLSTATE class 22/23), once more with that row isolated.
 */
async function storeBatch<M extends Message>(client: pg.PoolClient, batch: Batch<M>): Promise<Written> {
  try {
    return await writeBatch(client, batch, upsertAll);
  } catch (error) {
    if (!isRefusedDataError(error)) throw error;
    // 23503 after resolve: an app was hard-deleted; let the next batch re-resolve.
    if (error.code === '23503') batch.runtime.resolver.clear();
    batch.runtime.logger.warn('the database refused a row the decoder accepted; isolating it', {
      pipeline: batch.definition.name,
      sqlstate: error.code,
    });
    const written = await writeBatch(client, batch, upsertIsolatingRefused);
    // Each refused row by its exact place (every one, also past the per-batch rejection log
    // limit): the step-over runbook `peek`s that offset before it skips anything.
    const refused = written.letters.filter((letter) => letter.rejection.reason === 'rejected_by_database');
    batch.runtime.logger.warn('rows refused by the database', {
      pipeline: batch.definition.name,
      count: refused.length,
      rows: refused.slice(0, REFUSED_ROWS_LOGGED).map(({ record, rejection }) => ({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        detail: rejection.detail.slice(0, 300),
      })),
    });
    return written;
  }
}

/** At most this many refused rows are named in the `rows refused by the database` line (the dead letters hold all). */
const REFUSED_ROWS_LOGGED = 100;

/**
 * Letters already stored before this invocation (a replay or redelivery of poison records):
 * one INFO line per batch with their count, never a `message dead-lettered` WARN each (a log
 * alert on that text must not fire on every replay).
 */
function logAlreadyStored(logger: PipelineRuntime['logger'], written: Written): void {
  const stored = new Set(written.storedLetters);
  const already = written.letters.filter((letter) => !stored.has(letter));
  if (already.length === 0) return;
  const byReason: Record<string, number> = {};
  for (const letter of already) byReason[letter.rejection.reason] = (byReason[letter.rejection.reason] ?? 0) + 1;
  logger.info('dead letters already stored', { pipeline: already[0]?.pipeline, count: already.length, byReason });
}

/**
 * The batch, step by step (docs/design.md section 3): parse the event, decode every record, then, in ONE
 * transaction retried on transient errors, resolve the apps, dedupe, write dead letters and
 * upsert the rows (plus `options.beforeCommit`, if given); only after COMMIT report success.
 * Returns the handler's response and the batch report. Throws on fatal errors, and on an
 * exhausted retry budget unless the pipeline answers failures in the `report` form.
 */
export async function processBatch(
  event: unknown,
  runtime: PipelineRuntime,
  invocation: Invocation,
  options: BatchOptions = {},
): Promise<{ response: BatchResponse; report: BatchReport }> {
  const started = performance.now();
  // The definitions differ only in their message type, which the flow never looks into.
  const definition = runtime.definition as unknown as PipelineDefinition<Message, PipelineName>;
  const records = parseKafkaEvent(event);
  const ranges = offsetRanges(records);
  const partitions = [...ranges].map(([partition, range]) => ({ partition, ...range }));
  const { messages, rejections } = decodeAll(definition, records);
  const batch: Batch<Message> = {
    runtime,
    definition,
    messages,
    rejections,
    beforeCommit: options.beforeCommit,
    invocationId: randomUUID(),
  };

  let attempts = 0;
  const report = (written: Written | undefined, delays: RecordDelays = NO_RECORD_DELAYS): BatchReport => ({
    pipeline: definition.name,
    records: records.length,
    inserted: written?.inserted ?? 0,
    updated: written?.updated ?? 0,
    skipped: written?.skipped ?? 0,
    deduplicated: written?.deduplicated ?? 0,
    deadLettered: written?.storedLetters.length ?? 0,
    alreadyDeadLettered: (written?.letters.length ?? 0) - (written?.storedLetters.length ?? 0),
    durationMs: Math.round(performance.now() - started),
    attempts,
    failed: written === undefined,
    partitions,
    recordDelays: delays,
  });

  let written: Written;
  try {
    written = await withTransientRetry(
      async () => {
        attempts += 1;
        // Asked for on every attempt: a credential refresh (28P01) replaces the pool.
        const pool = await runtime.pool();
        return withClient(pool, invocation.remainingMs() - HAND_BACK_MARGIN_MS, (client) => storeBatch(client, batch));
      },
      {
        ...runtime.settings.retry,
        remainingMs: invocation.remainingMs,
        attemptReserveMs: attemptTimeNeededMs(runtime.settings.database),
        refreshCredentials: runtime.refreshCredentials,
        onWait: ({ attempt, delayMs, error }) => {
          runtime.logger.warn('transient database error; retrying the batch on a fresh connection', {
            pipeline: definition.name,
            ...batchPlaceFields(records),
            attempt,
            delayMs,
            ...loggedError(error),
          });
          invocation.onWait?.({ attempt, error, partitions: [...new Set(records.map((record) => record.partition))] });
        },
      },
    );
  } catch (error) {
    if (!(error instanceof RetryBudgetExhaustedError)) throw error;
    const failed = report(undefined);
    runtime.logger.error('batch not stored; handing it back for redelivery', {
      ...batchLogFields(failed),
      ...batchPlaceFields(records),
      failureResponse: runtime.settings.failureResponse,
      error: error.cause === undefined ? error.message : String(error.cause),
    });
    if (runtime.settings.failureResponse === 'throw') throw error;
    return {
      response: {
        batchItemFailures: partitions.map(({ partition, first }) => ({ itemIdentifier: { partition, offset: first } })),
      },
      report: failed,
    };
  }
  const done = report(written, recordDelays(records, written.committedAt));
  logRejections(runtime.logger, written.storedLetters, runtime.settings.rejectionLogLimit);
  logAlreadyStored(runtime.logger, written);
  runtime.logger.info('batch stored', batchLogFields(done));
  return { response: { batchItemFailures: [] }, report: done };
}
