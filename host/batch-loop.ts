/**
 * The host's per-partition batch loop (docs/design.md section 3, "The host on kafkajs"): one polled
 * batch of one partition is cut into events and taken into the partition's lane
 * (./partition-lanes.ts), which writes them in offset order while the next fetch goes on; each
 * event goes through one step: invoke, decide its offsets, commit or redeliver. It knows the Kafka
 * client only through {@link BatchPort}, the port's partition handle (kafka/port.ts), so a unit
 * test drives it with plain objects.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { PartitionHandle, PolledBatch } from '../kafka/port.js';
import { backoffDelayMs } from '../shared/backoff.js';
import type { Random } from '../shared/backoff.js';
import { deadlineIn } from './clock.js';
import type { CoreLogger } from '../shared/logger.js';
import type { EventSourceOptions } from '../shared/kafka-event-builder.js';
import type { PipelineSettings } from '../config/pipeline-settings.js';
import type { HostEvent } from './event-cut.js';
import { cutBatch } from './event-cut.js';
import type { InvocationResult, Invoker } from './invoker.js';
import type { PipelineMetrics } from './metrics.js';
import { decideOffsets } from './offsets.js';
import type { CommitPlace, OffsetCommitsState } from './offset-commits.js';
import { createOffsetCommits } from './offset-commits.js';
import { batchFields } from '../shared/batch-report.js';
import type { LaneStepOutcome } from './partition-lanes.js';
import { createPartitionLanes } from './partition-lanes.js';
import type { Membership } from './membership.js';
import { revokeCauseOf } from './membership.js';
import type { PipelineProgress } from './progress.js';
import type { HostSettings } from '../config/host-settings.js';
import { loggedError } from '../shared/errors.js';

/** Redelivery back-off never grows beyond this. */
const MAX_REDELIVERY_DELAY_MS = 60_000;

/** How often a back-off heartbeats and looks at the pipeline's halt (a stop ends it at once, through the membership's signal). */
const WAIT_SLICE_MS = 200;

/** The delay before the `attempt`-th consecutive redelivery: base, 2*base, 4*base ..., capped, each jittered down to as little as half. */
export function redeliveryDelayMs(attempt: number, baseMs: number, random?: Random): number {
  return backoffDelayMs(attempt, baseMs, MAX_REDELIVERY_DELAY_MS, random);
}

/** One polled batch of one partition (kafka/port.ts). */
export type PolledBatchView = PolledBatch;

/** What the loop needs of the Kafka client for one batch: the port's partition handle (kafka/port.ts). */
export type BatchPort = PartitionHandle;

/** Where an invocation's batch sits, for log lines and the progress record. */
export type BatchPlace = CommitPlace;

/** What the loop is built from: the pipeline's parts and the consumer's controls. */
export interface BatchLoopOptions {
  readonly pipeline: PipelineSettings;
  readonly settings: HostSettings;
  readonly invoker: Invoker;
  readonly logger: CoreLogger;
  readonly metrics?: PipelineMetrics;
  readonly progress: PipelineProgress;
  readonly source?: EventSourceOptions;
  /** How often the group is heartbeated during an invocation (a client may have no background heartbeat). */
  readonly heartbeatIntervalMs: number;
  /** True when the pipeline must not invoke anything now: failed, paused or its pause state unread. */
  readonly halted: () => boolean;
  /** Fails the pipeline (once). */
  readonly fail: (message: string, cause: unknown, place: BatchPlace) => void;
  /** Moves the partition's fetch position back to `offset`, for a redelivery. */
  readonly seek: (topic: string, partition: number, offset: string) => void;
  /**
   * The consumer's group membership (host/membership.ts): which partitions are this member's,
   * and the stop signal that ends every wait at once. A heartbeat that says the member is no
   * longer in the generation revokes its partitions here.
   */
  readonly membership: Pick<Membership, 'owns' | 'generation' | 'stopSignal' | 'revoke'>;
  /**
   * The offsets this member read as committed when it was assigned the partition (the floor no
   * commit of this generation may go below); `undefined` when none was read. See ./offset-commits.ts.
   */
  readonly committedAtAssignment?: (partition: number) => Promise<bigint | undefined>;
  /** Events invoked at the same time over all partitions (the database pool, or Lambda's concurrency). */
  readonly concurrency: number;
}

/**
 * The loop's whole state, explicit: per partition the consecutive redeliveries (the back-off's
 * exponent), and the state of the pipeline's offset commits (./offset-commits.ts: failures in a
 * row, the offsets asked for, the failed commits waiting for their retry).
 */
export interface BatchLoopState {
  readonly redeliveriesInRow: Map<number, number>;
  readonly commits: OffsetCommitsState;
}

/**
 * What one step did: go on with the next event; leave the rest of what the partition's lane
 * holds, which is fetched again from the next event (`leave`); or leave it where the fetch
 * position already went back to (`rewound`: a redelivery's seek, or a seek pending).
 */
export type StepOutcome = LaneStepOutcome;

/** The loop of one pipeline: `eachBatch` for each polled batch, `step` for one event of it. */
export interface BatchLoop {
  readonly state: BatchLoopState;
  /**
   * Cuts the batch into events and takes them into the partition's lane; resolves once the lane
   * has room for it (the events are written after the ones before them, in offset order).
   */
  eachBatch(port: BatchPort): Promise<void>;
  /** One event: invoke (heartbeating), decide its offsets, then commit, or back off and seek. */
  step(hostEvent: HostEvent, port: BatchPort): Promise<StepOutcome>;
  /** Runs kafkajs' join or leave once every event in flight is over, nothing waiting taken in. */
  whileDrained<T>(work: () => Promise<T>): Promise<T>;
  /** Resolves once every lane is idle. */
  idle(): Promise<void>;
}

/**
 * The events of a batch to invoke now. A last event smaller than the batch size is left for the
 * next fetch when the partition holds more records than this fetch brought (its offsets stay
 * unresolved, so the next fetch starts with it): the event source mapping sends full batches when
 * that many records are available. A batch whose only event is short is sent as it is, so that
 * the partition always moves on.
 */
function eventsToInvoke(events: readonly HostEvent[], batch: PolledBatchView, batchSize: number): readonly HostEvent[] {
  const last = events.at(-1);
  if (last === undefined || events.length < 2 || last.records >= batchSize || last.oversized) return events;
  const moreAvailable = BigInt(batch.highWatermark) > BigInt(batch.lastOffset()) + 1n;
  return moreAvailable ? events.slice(0, -1) : events;
}

/** Creates the batch loop of one pipeline. */
export function createBatchLoop(options: BatchLoopOptions): BatchLoop {
  const { pipeline, settings, invoker, logger, metrics, progress, heartbeatIntervalMs } = options;
  const { membership } = options;
  const commits = createOffsetCommits({
    pipeline,
    logger,
    metrics,
    progress,
    fail: options.fail,
    floorOf: options.committedAtAssignment,
  });
  const state: BatchLoopState = { redeliveriesInRow: new Map(), commits: commits.state };

  /**
   * A heartbeat's failure: one that says the member left the generation (a rebalance, the broker
   * dropped it) revokes its partitions in the membership, so nothing more of them is written
   * and nothing of them is sought; any other (a broken connection) leaves them ours.
   */
  const heartbeatFailed = (error: unknown) => {
    const cause = revokeCauseOf(error);
    if (cause !== undefined) membership.revoke(cause);
    return cause;
  };

  /** Heartbeats the group; false when it failed (the rest of the batch is left, to this member or, once revoked, to the next owner). */
  const heartbeatGroup = async (port: BatchPort): Promise<boolean> => {
    try {
      await port.heartbeat();
      return true;
    } catch (error) {
      const cause = heartbeatFailed(error);
      logger.info(
        cause === undefined
          ? 'group heartbeat failed; the rest of the batch is fetched again'
          : 'group heartbeat says this member left its generation; the rest of the batch is left to its next owner (committed offset)',
        { pipeline: pipeline.name, partition: port.batch.partition, cause, ...loggedError(error) },
      );
      return false;
    }
  };

  /** Invokes with the group heartbeated meanwhile: kafkajs has no background heartbeat. */
  const invoke = async (hostEvent: HostEvent, port: BatchPort): Promise<InvocationResult> => {
    const timer = setInterval(() => {
      port.heartbeat().catch(heartbeatFailed);
    }, heartbeatIntervalMs);
    try {
      return await invoker.invoke(hostEvent.event, deadlineIn(settings.maxPollIntervalMs));
    } finally {
      clearInterval(timer);
    }
  };

  /**
   * Waits before a redelivery, heartbeating; cut short by a stop (at once: the membership's stop
   * signal), a failure, a pause, or the partition's revoke.
   */
  const backOff = async (port: BatchPort, delayMs: number) => {
    const { partition } = port.batch;
    const until = performance.now() + delayMs;
    const signal = membership.stopSignal;
    while (performance.now() < until && port.isRunning() && !options.halted() && membership.owns(partition)) {
      try {
        await sleep(Math.min(WAIT_SLICE_MS, until - performance.now()), undefined, { signal });
      } catch {
        return; // the stop
      }
      if (!(await heartbeatGroup(port))) return;
    }
  };

  const placeOf = (hostEvent: HostEvent, batch: PolledBatchView): BatchPlace => {
    const [first] = hostEvent.partitions;
    return {
      topic: batch.topic,
      partition: batch.partition,
      firstOffset: first?.offsets[0] ?? batch.firstOffset() ?? '',
      lastOffset: first?.offsets.at(-1) ?? batch.lastOffset(),
    };
  };

  /** The redelivery path of a step: count, log, back off (heartbeating), seek. */
  const redeliver = async (
    port: BatchPort,
    place: BatchPlace,
    result: InvocationResult,
    decision: ReturnType<typeof decideOffsets>,
    inFlight: { attempt: number; startedAt: number },
  ) => {
    const { partition } = port.batch;
    const attempt = (state.redeliveriesInRow.get(partition) ?? 0) + 1;
    state.redeliveriesInRow.set(partition, attempt);
    const delayMs = redeliveryDelayMs(attempt, settings.invoke.retryBaseMs);
    const why = result.kind === 'error' ? result.error : (decision.reason ?? decision.outcome);
    progress.notStored(partition, why);
    logger[decision.outcome === 'failed' ? 'error' : 'warn']('batch not stored; redelivering it after a back-off', {
      pipeline: pipeline.name,
      ...batchFields(place),
      outcome: decision.outcome,
      reason: decision.reason,
      error: result.kind === 'error' ? String(result.error) : undefined,
      committed: decision.commit,
      redeliverFrom: decision.redeliver,
      attempt,
      batchAttempt: inFlight.attempt,
      batchAgeMs: Math.round(performance.now() - inFlight.startedAt),
      delayMs,
    });
    await backOff(port, delayMs);
    // Revoked or stopping: the partition's next owner (or this member after its next join)
    // starts from the committed offset; a seek now would outlive the generation.
    if (!membership.owns(partition)) {
      progress.dropped(partition);
      return;
    }
    // From here the batch needs a fetch to come back: it no longer excuses a missing one.
    progress.awaitingRedelivery(partition);
    for (const { topic, partition: sought, offset } of decision.redeliver) options.seek(topic, sought, offset);
  };

  const step = async (hostEvent: HostEvent, port: BatchPort): Promise<StepOutcome> => {
    const { batch } = port;
    const place = placeOf(hostEvent, batch);
    const inFlight = progress.attemptStarted({ ...place, highWatermark: batch.highWatermark });
    if (hostEvent.oversized) {
      const [first] = hostEvent.partitions;
      logger.warn('one record exceeds STORAGE_MAX_EVENT_BYTES on its own; it is sent alone', {
        pipeline: pipeline.name,
        partition: first?.key,
        offset: first?.offsets[0],
        eventBytes: hostEvent.bytes,
      });
    }
    const began = performance.now();
    const result = await invoke(hostEvent, port);
    const seconds = (performance.now() - began) / 1000;
    // Invoked: nothing reads the built event again (a redelivery fetches the records anew).
    hostEvent.release();
    if (result.kind === 'error' && result.fatal) {
      metrics?.batchDone('failed', seconds);
      const error = result.error;
      options.fail(`fatal handler error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`, error, place);
      return 'leave';
    }
    const decision = decideOffsets(hostEvent.partitions, result, settings.reportBatchItemFailures);
    metrics?.batchDone(decision.outcome === 'success' ? 'stored' : 'failed', seconds);
    if (decision.reportedWithoutSwitch > 0) {
      logger.error('failure report honoured although STORAGE_REPORT_BATCH_ITEM_FAILURES is off', {
        pipeline: pipeline.name,
        reportedFailures: decision.reportedWithoutSwitch,
        why:
          'on AWS a mapping without ReportBatchItemFailures counts this report as success and loses the batch: switch it on ' +
          'wherever the function reports failures',
        partitions: hostEvent.partitions.map(({ key, offsets }) => ({ partition: key, first: offsets[0], last: offsets.at(-1) })),
      });
    }
    // The partition was sought meanwhile: drop the batch, commit nothing; the seek says where it goes on.
    if (port.isStale()) {
      progress.dropped(batch.partition);
      return 'rewound';
    }
    if (decision.commit.length > 0) await commits.commit(port, decision.commit, place);
    if (decision.redeliver.length > 0) {
      await redeliver(port, place, result, decision, inFlight);
      return 'rewound';
    }
    state.redeliveriesInRow.delete(batch.partition);
    progress.stored(batch.partition);
    return (await heartbeatGroup(port)) ? 'next' : 'leave';
  };

  const eachBatch = async (port: BatchPort): Promise<void> => {
    const { batch } = port;
    const events = cutBatch(
      { topic: batch.topic, partition: batch.partition, records: batch.records, lastOffset: batch.lastOffset() },
      { batchSize: pipeline.batchSize, maxEventBytes: settings.maxEventBytes, source: options.source },
    );
    // After a stop request or a seek the batch is not ours to invoke. After a pause it waits:
    // its offsets are not resolved, so the first fetch after the resume starts with it.
    if (options.halted() || !port.isRunning() || port.isStale()) return;
    await lanes.enqueue(batch.partition, port, eventsToInvoke(events, batch, pipeline.batchSize));
  };

  const lanes = createPartitionLanes<BatchPort>({
    concurrency: options.concurrency,
    halted: options.halted,
    owns: (partition, generation) => membership.owns(partition, generation),
    generation: () => membership.generation,
    step,
    seek: (partition, offset) => options.seek(pipeline.topic, partition, offset),
    // A bug in the host itself (e.g. an offset no Lambda event can carry): never a kafkajs retry.
    onError: (error, hostEvent, port) =>
      options.fail(`unexpected error in the host: ${String(error)}`, error, placeOf(hostEvent, port.batch)),
  });

  // A join or a leave hands the partitions on: the new generation starts from the committed
  // offsets, and a commit of the old one would be refused.
  const whileDrained = <T>(work: () => Promise<T>): Promise<T> =>
    lanes.whileDrained(() => {
      commits.forget();
      return work();
    });

  return { state, eachBatch, step, whileDrained, idle: () => lanes.idle() };
}
