import type pg from 'pg';
import type { DecodeResult } from './contracts/types.js';
import type { DeadLetter } from './dead-letters.js';
import { insertDeadLetters } from './dead-letters.js';
import { dedupeByKey } from './dedupe.js';
import { attemptTimeNeededMs, beginBatchTransaction, HAND_BACK_MARGIN_MS, withClient } from './connection.js';
import { isRefusedDataError } from './error-classification.js';
import { RetryBudgetExhaustedError } from './errors.js';
import type { CoreLogger } from './db.js';
import { offsetRanges, parseKafkaEvent } from './kafka-event.js';
import type { AnyPipelineDefinition, BoundRow, PipelineDefinition } from './pipeline-definitions.js';
import type { ApplicationResolver } from './resolver.js';
import { withTransientRetry } from './retry.js';
import type { Settings } from './settings.js';
import type { Queryable } from './queryable.js';
import type { KafkaRecord, WriteOutcome } from './types.js';
import type { PrecheckSwitch } from './upsert.js';
import { upsertRows, upsertRowsIsolating } from './upsert.js';
import { logRejections } from './rejection-log.js';

/** The partial batch response of a Kafka event source mapping. */
export interface BatchResponse {
  batchItemFailures: Array<{ itemIdentifier: { partition: string; offset: number } }>;
}

/** Everything one batch did; logged as one INFO line and turned into metrics. */
export interface BatchReport extends WriteOutcome {
  readonly pipeline: string;
  readonly records: number;
  readonly deduplicated: number;
  /** Dead letters this batch stored: the `DeadLettered` metric and its alarm count only these. */
  readonly deadLettered: number;
  /**
   * Records whose dead letter was already stored (a replay or redelivery of a poison record:
   * same coordinates, same payload); counted apart so that a replay does not fire the alarm.
   */
  readonly alreadyDeadLettered: number;
  readonly durationMs: number;
  readonly attempts: number;
  /** The batch did not commit and was handed back for redelivery. */
  readonly failed: boolean;
  readonly partitions: ReadonlyArray<{ partition: string; first: number; last: number }>;
}

/**
 * The per-batch log line's fields, named as docs/design.md section 6 names them (other tooling reads
 * them): records = inserted + updated + skipped + deduplicated + dead_lettered +
 * already_dead_lettered.
 */
export function batchLogFields(report: BatchReport): Record<string, unknown> {
  return {
    pipeline: report.pipeline,
    records: report.records,
    inserted: report.inserted,
    updated: report.updated,
    skipped: report.skipped,
    deduplicated: report.deduplicated,
    dead_lettered: report.deadLettered,
    already_dead_lettered: report.alreadyDeadLettered,
    duration_ms: report.durationMs,
    attempts: report.attempts,
    failed: report.failed,
    partitions: report.partitions,
  };
}

/** What one pipeline keeps between batches: its pool and its cache (nothing shared). */
export interface PipelineRuntime {
  readonly definition: AnyPipelineDefinition;
  readonly settings: Settings;
  readonly logger: CoreLogger;
  readonly pool: () => Promise<pg.Pool>;
  readonly resolver: ApplicationResolver;
  /** Whether the upsert filters stale rows first: learnt from the pipeline's last batch. */
  readonly precheck: PrecheckSwitch;
  /** Re-reads rotated database credentials (AWS); absent locally. */
  readonly refreshCredentials?: () => Promise<void>;
}

/** The invocation's clock: Lambda's `context.getRemainingTimeInMillis()` or the host's deadline. */
export interface Invocation {
  readonly remainingMs: () => number;
  /** Called while the batch waits to retry (the host heartbeats its consumer group here). */
  readonly onWait?: () => void;
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

type Decoded<M> = { readonly record: KafkaRecord; readonly message: M };

interface Written extends WriteOutcome {
  readonly deduplicated: number;
  /** Every dead letter of the batch, new or already stored. */
  readonly letters: readonly DeadLetter[];
  /** How many of `letters` this attempt stored (the rest conflicted with a stored one). */
  readonly newLetters: number;
}

/**
 * One transaction attempt on one connection: open the batch transaction (its timeouts and
 * time zone set inside it, so a pooler passes them), resolve, bind, dedupe, then dead letters
 * and rows, COMMIT. With `isolating`, rows the database refuses are bisected out under
 * savepoints and dead-lettered as `rejected_by_database`.
 */
async function writeBatch<M extends { readonly package_name: string }>(
  client: pg.PoolClient,
  runtime: PipelineRuntime,
  definition: PipelineDefinition<M>,
  messages: readonly Decoded<M>[],
  decodeRejections: readonly DeadLetter[],
  isolating: boolean,
  beforeCommit: BatchOptions['beforeCommit'],
): Promise<Written> {
  const database = runtime.settings.database;
  const sent = { prepared: database.preparedStatements };
  await beginBatchTransaction(client, database);
  try {
    const applications = await runtime.resolver.resolve(
      client,
      messages.map((decoded) => decoded.message.package_name),
    );
    const letters: DeadLetter[] = [...decodeRejections];
    const bound: BoundRow<M>[] = [];
    for (const { record, message } of messages) {
      const applicationId = applications.get(message.package_name);
      if (applicationId === undefined) {
        letters.push({
          pipeline: definition.name,
          record,
          rejection: { reason: 'unknown_application', detail: `package_name ${JSON.stringify(message.package_name)} is not registered` },
        });
      } else bound.push({ message, applicationId, record });
    }
    const { kept, dropped } = dedupeByKey(bound, definition.naturalKey, definition.prefer);
    let newLetters = await insertDeadLetters(client, letters, sent);
    let outcome: WriteOutcome;
    const upsert = { ...sent, precheck: runtime.precheck.enabled };
    if (!isolating) outcome = await upsertRows(client, definition.table, kept, upsert);
    else {
      const isolated = await upsertRowsIsolating(client, definition.table, kept, upsert);
      outcome = isolated.outcome;
      const refused: DeadLetter[] = isolated.refused.map(({ row, error }) => ({
        pipeline: definition.name,
        record: row.record,
        rejection: { reason: 'rejected_by_database', detail: `SQLSTATE ${error.code ?? '?'}: ${error.message}` },
      }));
      newLetters += await insertDeadLetters(client, refused, sent);
      letters.push(...refused);
    }
    await beforeCommit?.(client, letters);
    await client.query('COMMIT');
    runtime.precheck.observe(outcome);
    return { ...outcome, deduplicated: dropped, letters, newLetters };
  } catch (error) {
    // Only the refused-rows path reuses this connection; on a dead one ROLLBACK fails too, and
    // `withClient` destroys the connection anyway.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

function decodeAll<M extends { readonly package_name: string }>(
  definition: PipelineDefinition<M>,
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
  // The three definitions differ only in their message type, which the flow never looks into.
  const definition = runtime.definition as unknown as PipelineDefinition<{ readonly package_name: string }>;
  const records = parseKafkaEvent(event);
  const ranges = offsetRanges(records);
  const partitions = [...ranges].map(([partition, range]) => ({ partition, ...range }));
  const { messages, rejections } = decodeAll(definition, records);

  let attempts = 0;
  const report = (written: Written | undefined): BatchReport => ({
    pipeline: definition.name,
    records: records.length,
    inserted: written?.inserted ?? 0,
    updated: written?.updated ?? 0,
    skipped: written?.skipped ?? 0,
    deduplicated: written?.deduplicated ?? 0,
    deadLettered: written?.newLetters ?? 0,
    alreadyDeadLettered: (written?.letters.length ?? 0) - (written?.newLetters ?? 0),
    durationMs: Math.round(performance.now() - started),
    attempts,
    failed: written === undefined,
    partitions,
  });

  let written: Written;
  try {
    written = await withTransientRetry(
      async () => {
        attempts += 1;
        // Asked for on every attempt: a credential refresh (28P01) replaces the pool.
        const pool = await runtime.pool();
        return withClient(pool, invocation.remainingMs() - HAND_BACK_MARGIN_MS, async (client) => {
          try {
            return await writeBatch(client, runtime, definition, messages, rejections, false, options.beforeCommit);
          } catch (error) {
            if (!isRefusedDataError(error)) throw error;
            // 23503 after resolve: an app was hard-deleted; let the next batch re-resolve.
            if (error.code === '23503') runtime.resolver.clear();
            runtime.logger.warn('the database refused a row the decoder accepted; isolating it', {
              pipeline: definition.name,
              sqlstate: error.code,
            });
            return await writeBatch(client, runtime, definition, messages, rejections, true, options.beforeCommit);
          }
        });
      },
      {
        ...runtime.settings.retry,
        remainingMs: invocation.remainingMs,
        attemptReserveMs: attemptTimeNeededMs(runtime.settings.database),
        refreshCredentials: runtime.refreshCredentials,
        onRetry: ({ attempt, delayMs, error }) => {
          runtime.logger.warn('transient database error; retrying the batch on a fresh connection', {
            pipeline: definition.name,
            attempt,
            delayMs,
            error: String(error),
          });
          invocation.onWait?.();
        },
      },
    );
  } catch (error) {
    if (!(error instanceof RetryBudgetExhaustedError)) throw error;
    const failed = report(undefined);
    runtime.logger.error('batch not stored; handing it back for redelivery', {
      ...batchLogFields(failed),
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
  const done = report(written);
  logRejections(runtime.logger, written.letters, runtime.settings.rejectionLogLimit);
  runtime.logger.info('batch stored', batchLogFields(done));
  return { response: { batchItemFailures: [] }, report: done };
}
