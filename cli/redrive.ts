import type pg from 'pg';
import type { DeadLetter } from '../shared/dead-letters.js';
import { deadLetterRow } from '../shared/dead-letters.js';
import { buildKafkaEvent } from '../shared/kafka-event-builder.js';
import type { SourceRecord } from '../shared/kafka-event-builder.js';
import type { CoreLogger } from '../shared/logger.js';
import { AuditUnavailableError, recordInTransaction } from '../shared/operator-actions.js';
import type { AuditPolicy } from '../shared/operator-actions.js';
import { processBatch } from '../shared/process-batch.js';
import { isPipelineName } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import type { Queryable } from '../shared/queryable.js';
import { createPipelineRuntime } from '../shared/runtime.js';
import type { ConsumerSettings } from '../config/pipeline-settings.js';
import type { DeadLetterFilter, StoredDeadLetter } from './dead-letter-store.js';
import { isTruncated, listDeadLetters, nextPendingDeadLetters, pipelinesWithDeadLetters } from './dead-letter-store.js';

const UNKNOWN_PIPELINE_LISTED = 100;

/** A dead letter the re-drive had to leave alone, and why. */
export interface NotRedrivable {
  readonly id: string;
  readonly why: string;
}

/** What the re-drive did for one pipeline. */
export interface PipelineRedrive {
  readonly pipeline: string;
  /** Pending dead letters that matched the filter. */
  readonly selected: number;
  /** Now stored (or already present) and marked `redriven_at`. */
  readonly redriven: number;
  /** Failed again: left pending, their reason and detail updated. */
  readonly stillFailing: number;
  /** The ids of those, in id order: every selected letter left pending is named here or in `notRedrivable`. */
  readonly stillFailingIds: readonly string[];
  readonly notRedrivable: readonly NotRedrivable[];
  /** Batches whose audit entry could not be written and that went on unrecorded (only under `--no-audit`). */
  readonly unrecordedBatches: number;
  /** Why the last of those was not recorded. */
  readonly unrecordedReason?: string;
  /** Rows the re-driven messages wrote, as the batch reports count them. */
  readonly inserted: number;
  readonly updated: number;
  readonly skipped: number;
}

/** How far the re-drive of one pipeline is, after each batch. */
export interface RedriveProgress {
  readonly pipeline: string;
  /** Pending letters selected when the pipeline started. */
  readonly total: number;
  /** Letters handled so far (stored, failed again or left alone). */
  readonly done: number;
  readonly redriven: number;
  readonly stillFailing: number;
}

/** Called after each batch; a terminal shows it. */
export type RedriveProgressListener = (progress: RedriveProgress) => void;

/** The identity `dead_letter_events` enforces: coordinates plus the hash of the full value. */
function identity(topic: string, partition: number, offset: string | number, sha256: Buffer): string {
  return `${topic}\u0000${partition}\u0000${offset}\u0000${sha256.toString('hex')}`;
}

/** Rebuilds the record as Kafka delivered it, from what the dead letter stored. */
function sourceRecord(letter: StoredDeadLetter): SourceRecord {
  return {
    topic: letter.topic,
    partition: letter.partition,
    offset: letter.offset,
    timestamp: letter.kafkaTimestamp?.getTime() ?? -1,
    key: letter.key,
    value: letter.payload,
    headers: letter.headers.map((header) => ({
      name: header.name ?? Buffer.from(header.name_base64 ?? '', 'base64').toString('utf8'),
      value: Buffer.from(header.value, 'base64'),
    })),
  };
}

/**
 * Inside the batch's transaction, before COMMIT: the letters that failed again keep their row
 * (the pipeline's insert met its own identity and did nothing) with the new reason and detail;
 * every other letter of the batch is now stored and gets `redriven_at`.
 */
async function markOutcome(
  client: Queryable,
  batch: readonly StoredDeadLetter[],
  failedAgain: readonly DeadLetter[],
): Promise<{ redriven: number; stillFailing: readonly string[] }> {
  const idByIdentity = new Map(
    batch.map((letter) => [identity(letter.topic, letter.partition, letter.offset, letter.payloadSha256), letter.id]),
  );
  const failed = new Map<string, { reason: string; detail: string }>();
  for (const letter of failedAgain) {
    const row = deadLetterRow(letter);
    const id = idByIdentity.get(identity(letter.record.topic, letter.record.partition, letter.record.offset, row.payloadSha256));
    if (id !== undefined) failed.set(id, { reason: row.reason, detail: row.detail });
  }
  if (failed.size > 0) {
    await client.query(
      `UPDATE dead_letter_events AS stored SET reason = failed.reason, detail = failed.detail
         FROM unnest($1::bigint[], $2::text[], $3::text[]) AS failed(id, reason, detail)
        WHERE stored.id = failed.id`,
      [[...failed.keys()], [...failed.values()].map((value) => value.reason), [...failed.values()].map((value) => value.detail)],
    );
  }
  const stored = batch.map((letter) => letter.id).filter((id) => !failed.has(id));
  const marked = await client.query(
    'UPDATE dead_letter_events SET redriven_at = now() WHERE id = ANY($1::bigint[]) AND redriven_at IS NULL',
    [stored],
  );
  return { redriven: marked.rowCount ?? 0, stillFailing: [...failed.keys()] };
}

/** The filter as the audit entry's arguments (instants as ISO text). */
function filterArguments(filter: DeadLetterFilter, pipeline: string): Record<string, unknown> {
  return {
    pipeline,
    ...(filter.reason === undefined ? {} : { reason: filter.reason }),
    ...(filter.since === undefined ? {} : { since: filter.since.toISOString() }),
  };
}

async function redrivePipeline(
  db: Queryable,
  name: PipelineName,
  settings: ConsumerSettings,
  filter: DeadLetterFilter,
  logger: CoreLogger,
  actor: string,
  audit: AuditPolicy,
  onProgress: RedriveProgressListener | undefined,
): Promise<PipelineRedrive> {
  const runtime = createPipelineRuntime(name, settings, logger);
  const totals = { selected: 0, redriven: 0, stillFailing: 0, inserted: 0, updated: 0, skipped: 0, unrecordedBatches: 0 };
  const notRedrivable: NotRedrivable[] = [];
  const stillFailingIds: string[] = [];
  let unrecordedReason: string | undefined;
  const total = onProgress ? (await listDeadLetters(db, { ...filter, pipeline: name, pendingOnly: true }, 0)).total : 0;
  const reportProgress = () =>
    onProgress?.({ pipeline: name, total, done: totals.selected, redriven: totals.redriven, stillFailing: totals.stillFailing });
  try {
    let afterId = '0';
    for (;;) {
      const page = await nextPendingDeadLetters(db, { ...filter, pipeline: name }, afterId, settings.pipelines[name].batchSize);
      if (page.length === 0) break;
      afterId = page.at(-1)?.id ?? afterId;
      totals.selected += page.length;
      const batch = page.filter((letter) => !isTruncated(letter));
      for (const letter of page.filter((candidate) => isTruncated(candidate))) {
        notRedrivable.push({ id: letter.id, why: `payload truncated to ${letter.storedSize} of ${letter.payloadSize} bytes` });
      }
      if (batch.length === 0) {
        reportProgress();
        continue;
      }
      let outcome: { redriven: number; stillFailing: readonly string[] } = { redriven: 0, stillFailing: [] };
      let unrecorded: string | undefined;
      let report;
      try {
        ({ report } = await processBatch(
          buildKafkaEvent(batch.map(sourceRecord)),
          runtime,
          { remainingMs: () => Number.POSITIVE_INFINITY },
          {
            // The batch's audit entry commits with the batch, or not at all: no entry, no re-drive.
            beforeCommit: async (client, letters) => {
              outcome = await markOutcome(client, batch, letters);
              const record = await recordInTransaction(
                client,
                {
                  actor,
                  command: 'dlq redrive',
                  arguments: filterArguments(filter, name),
                  outcome: {
                    counts: { selected: batch.length, redriven: outcome.redriven, stillFailing: outcome.stillFailing.length },
                    ids: { first: batch[0]?.id, last: batch.at(-1)?.id },
                  },
                },
                audit,
              );
              unrecorded = record.unrecorded;
            },
          },
        ));
      } catch (error) {
        if (!(error instanceof AuditUnavailableError)) throw error;
        throw new RedriveStoppedError(error, name, { ...totals, notRedrivable: notRedrivable.length });
      }
      // Under STORAGE_FAILURE_RESPONSE=report an exhausted retry budget returns instead of throwing.
      if (report.failed) {
        throw new Error(
          `a ${name} batch could not be stored (transient database errors) and was rolled back; the batches before it are done: run the ` +
            `re-drive again`,
        );
      }
      totals.redriven += outcome.redriven;
      totals.stillFailing += outcome.stillFailing.length;
      stillFailingIds.push(...outcome.stillFailing);
      if (unrecorded !== undefined) {
        totals.unrecordedBatches += 1;
        unrecordedReason = unrecorded;
      }
      totals.inserted += report.inserted;
      totals.updated += report.updated;
      totals.skipped += report.skipped;
      reportProgress();
    }
  } finally {
    await runtime.close();
  }
  return {
    pipeline: name,
    ...totals,
    stillFailingIds,
    notRedrivable,
    ...(unrecordedReason === undefined ? {} : { unrecordedReason }),
  };
}

/**
 * A batch's audit entry could not be written: that batch was rolled back and the re-drive
 * stopped. The batches before it are done (and recorded); `done` counts them.
 */
export class RedriveStoppedError extends AuditUnavailableError {
  constructor(
    cause: AuditUnavailableError,
    readonly pipeline: string,
    readonly done: { readonly selected: number; readonly redriven: number; readonly stillFailing: number; readonly notRedrivable: number },
  ) {
    super(cause.reason, cause.code, { cause });
    this.name = 'RedriveStoppedError';
  }
}

/**
 * Re-drives the pending dead letters that match `filter` through the same pipeline code as
 * Kafka's records (decode, resolve, upsert), one transaction per batch of the pipeline's batch
 * size: the ones that now succeed are stored and marked `redriven_at`, the ones that fail
 * again stay pending with their detail updated. A truncated payload is never re-driven.
 * Running it twice changes nothing the first run did. `onProgress` hears after every batch.
 * Every batch writes an audit entry (`operator_actions`, command `dlq redrive`, by `actor`) in
 * its own transaction; when it cannot, that batch is rolled back and the re-drive stops with a
 * {@link RedriveStoppedError}, unless `audit` is `waived` (`--no-audit`): then the batch is
 * stored unrecorded and the result counts it.
 */
export async function redriveDeadLetters(
  db: pg.Pool,
  settings: ConsumerSettings,
  filter: DeadLetterFilter,
  logger: CoreLogger,
  actor: string,
  audit: AuditPolicy,
  onProgress?: RedriveProgressListener,
): Promise<PipelineRedrive[]> {
  const results: PipelineRedrive[] = [];
  for (const pipeline of await pipelinesWithDeadLetters(db, { ...filter, pendingOnly: true })) {
    if (isPipelineName(pipeline)) {
      results.push(await redrivePipeline(db, pipeline, settings, filter, logger, actor, audit, onProgress));
      continue;
    }
    // Only a hand-edited row can name no pipeline; say so rather than guess one.
    const { total, letters } = await listDeadLetters(db, { ...filter, pipeline, pendingOnly: true }, UNKNOWN_PIPELINE_LISTED);
    results.push({
      pipeline,
      selected: total,
      redriven: 0,
      stillFailing: 0,
      stillFailingIds: [],
      notRedrivable: letters.map(({ id }) => ({ id, why: `no pipeline named ${JSON.stringify(pipeline)}` })),
      inserted: 0,
      updated: 0,
      skipped: 0,
      unrecordedBatches: 0,
    });
  }
  return results;
}
