/**
 * One pipeline's consumer: between the Kafka port's consumer (kafka/port.ts, whichever client
 * the settings chose) and the batch loop (./batch-loop.ts). It asks for the consumer (group,
 * timeouts, fetch sizes), hands each partition handle to the loop, wires the membership's events
 * (join, rebalance, crash) into the progress record, obeys the pause, and gates every join and
 * leave on the writes in flight. docs/design.md section 3 describes it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConsumerCrash, ConsumerOptions, ConsumerPort } from '../kafka/port.js';
import type { CoreLogger } from '../shared/logger.js';
import type { PipelinePause } from '../shared/pause-store.js';
import type { PipelineSettings } from '../config/pipeline-settings.js';
import { PipelineFailedError } from './pipeline-failure.js';
import type { Invoker } from './invoker.js';
import type { PipelineMetrics } from './metrics.js';
import { batchFields } from '../shared/batch-report.js';
import type { BatchLoop, BatchPlace } from './batch-loop.js';
import { createBatchLoop } from './batch-loop.js';
import type { PipelineProgress } from './progress.js';
import type { HostSettings } from '../config/host-settings.js';
import { groupHeartbeatIntervalMs } from '../config/setting-declarations.js';
import { Membership } from './membership.js';
import { watchTopicIncarnation } from './topic-incarnation.js';
import type { TopicIdSource } from './topic-incarnation.js';
import type { MembershipSnapshot } from './membership.js';
import { loggedError } from '../shared/errors.js';

/** Bytes fetched per partition (the Java client's default) and per fetch. */
const MAX_BYTES_PER_PARTITION = 1_048_576;
const MAX_BYTES = 4 * MAX_BYTES_PER_PARTITION;

/** Time a member has to rejoin beyond the worst batch, for the commit and a poll. */
export const REBALANCE_MARGIN_MS = 10_000;

/** One pipeline's consumer. */
export interface PipelineConsumer {
  /** Connects, subscribes and joins the group; throws when the pipeline cannot start. */
  start(): Promise<void>;
  /** Stops polling, lets the in-flight batch finish and commit, leaves the group, disconnects. */
  stop(): Promise<void>;
  /** Fails the pipeline (once): logs `pipeline failed` and tells the supervisor. */
  fail(message: string, cause?: unknown): void;
  /** This consumer's member id in its group since it last joined (`undefined` before). */
  memberId(): string | undefined;
  /**
   * Pauses (a pause row) or resumes (`undefined`) the pipeline in this process: a pause lets the
   * batch in flight finish and commit, then fetches nothing of any assigned partition; the
   * consumer stays in its group (kafkajs keeps heartbeating), so nothing rebalances. Until the
   * first call (the pause state read once) the consumer fetches nothing: it may be paused.
   */
  setPaused(pause: PipelinePause | undefined): void;
  /** Resolves once no batch taken in is still being written (the batches are written while kafkajs fetches on). */
  idle(): Promise<void>;
  /** Its group membership now (host/membership.ts). */
  membership(): MembershipSnapshot;
}

/** The command that steps over an unreadable batch (docs/operations.md), for its log line. */
export function skipCommand(pipeline: string, partition: number, lastOffset: string): string {
  return `storage-consumer replay ${pipeline} --partition ${partition} --to-offset ${(BigInt(lastOffset) + 1n).toString()} --allow-skip`;
}

/**
 * Why a crash the client does not restart from fails the pipeline, and where: the same bytes fail
 * the same way on every start, so an unreadable batch names its codec and offsets, once, and how
 * to step over it should Kafka's own clients not read it either.
 */
function crashFailure(pipeline: PipelineSettings, crash: ConsumerCrash): { message: string; place?: BatchPlace } {
  const { error, unreadable } = crash;
  if (unreadable === undefined) return { message: `kafka consumer crashed: ${error.message}` };
  const { codec } = unreadable;
  const what = codec === undefined ? 'a record batch' : `a record batch compressed with ${codec}`;
  if (unreadable.location === undefined)
    return { message: `topic ${pipeline.topic} holds ${what} that this host cannot read: ${error.message}` };
  const { partition, baseOffset, lastOffset } = unreadable.location;
  const { reason } = unreadable;
  return {
    message:
      `topic ${pipeline.topic} partition ${partition} holds ${what} at offsets ${baseOffset}..${lastOffset} that this host cannot read: ` +
      `${reason}; ` +
      `if Kafka's own clients cannot read it either, step over it with: ${skipCommand(pipeline.name, partition, lastOffset)}`,
    place: { topic: pipeline.topic, partition, firstOffset: baseOffset, lastOffset },
  };
}

/** What a pipeline consumer is built from. */
export interface PipelineConsumerOptions {
  readonly pipeline: PipelineSettings;
  readonly settings: HostSettings;
  /** Builds the pipeline's Kafka consumer (the `KafkaClient`'s `consumer` in the host). */
  readonly consumers: (options: ConsumerOptions) => ConsumerPort;
  readonly invoker: Invoker;
  readonly logger: CoreLogger;
  /** Told once when the pipeline fails; the supervisor then stops every pipeline. */
  readonly onFailure: (error: PipelineFailedError) => void;
  /** Where the pipeline's batches and commit failures are counted. */
  readonly metrics?: PipelineMetrics;
  /** The pipeline's progress record (host/progress.ts): this consumer keeps it. */
  readonly progress: PipelineProgress;
  /**
   * Reads the group's committed offsets of the topic (partition -> next offset; absent: none).
   * Read at every assignment: no commit of that generation may go below it (./offset-commits.ts).
   */
  readonly readCommitted?: () => Promise<ReadonlyMap<number, bigint>>;
  /** Reads the topic's id (the `KafkaClient`'s `topicIds`); without it a re-created topic is not noticed. */
  readonly topicIds?: TopicIdSource;
  /** Where the group reads each partition now: its committed offset, else the start (kafka/lag.ts `groupStartOffsets`). */
  readonly readStartOffsets?: () => Promise<ReadonlyMap<number, string>>;
}

/** What {@link leaveGroup} works on: the consumer, its loop, and whether its leave may be let go after the writes. */
interface LeaveOptions {
  readonly consumer: Pick<ConsumerPort, 'disconnect'>;
  readonly loop: Pick<BatchLoop, 'whileDrained' | 'idle'>;
  readonly logger: CoreLogger;
  readonly pipeline: PipelineSettings;
  readonly settings: HostSettings;
  /** kafkajs' leave may hang: the consumer holds no assignment, or the pipeline failed. */
  readonly letGo: boolean;
  readonly failed: boolean;
}

/**
 * A consumer's leave: the writes in flight finish (and commit) first, what waits is dropped, then
 * kafkajs disconnects. A healthy member with an assignment waits for the whole leave. Two stops do
 * not wait for it past the writes (`letGo`): a consumer without an assignment (kafkajs' disconnect
 * waits for a JoinGroup in progress, which the coordinator may hold for the whole rebalance
 * timeout, e.g. until a killed member's session runs out), and a failed pipeline (its broker may be
 * gone: kafkajs then retries the LeaveGroup for seconds). Either waits as long as its lanes still
 * write (a rebalance's drain waits for them too), then for a poll and 2 s at most.
 */
async function leaveGroup({ consumer, loop, logger, pipeline, settings, letGo, failed }: LeaveOptions): Promise<void> {
  const disconnected = loop.whileDrained(() => consumer.disconnect()).then(() => 'left' as const);
  if (!letGo) {
    await disconnected;
    return;
  }
  const graceMs = settings.pollTimeoutMs + 2_000;
  const ended = await Promise.race([disconnected, loop.idle().then(() => sleep(graceMs, 'abandoned' as const, { ref: false }))]);
  if (ended === 'abandoned') {
    logger.warn('stopped without leaving the consumer group: the writes in flight finished, but kafkajs did not finish its leave', {
      pipeline: pipeline.name,
      group: pipeline.group,
      waitedMs: graceMs,
      failed,
      action:
        "the group's coordinator drops this member after its session timeout " +
        `(STORAGE_SESSION_TIMEOUT_MS=${settings.sessionTimeoutMs}); the partitions then move to the other members`,
    });
  }
}

/**
 * The host's event source mapping for one pipeline (docs/design.md section 3, "The host on kafkajs"):
 * one consumer in the pipeline's group, auto-commit and auto-resolve off; each polled batch is
 * cut into events, each event invoked, and its offsets resolved and committed only as
 * `decideOffsets` says. Handler errors never escape `eachBatch`: redelivery is the host's own
 * (back-off with heartbeats, then a seek to the first uncommitted offset).
 */
export function createPipelineConsumer(options: PipelineConsumerOptions): PipelineConsumer {
  const { pipeline, settings, invoker, logger, metrics, progress } = options;
  const heartbeatIntervalMs = groupHeartbeatIntervalMs(settings.sessionTimeoutMs);
  const source = { eventSource: 'SelfManagedKafka' as const, bootstrapServers: settings.kafka.brokers.join(',') };
  const concurrency = settings.invoke.mode === 'lambda' ? 3 : settings.storage.database.poolMax;
  let failure: PipelineFailedError | undefined;
  let stopping = false;
  /** The pause this process obeys (from `pipeline_pauses`); `undefined` = running. */
  let pause: PipelinePause | undefined;
  /** Until the pause state was read once, nothing is fetched: the pipeline may be paused. */
  let pauseKnown = false;
  const held = () => !pauseKnown || pause !== undefined;
  /** The consumer was started (before that, a first pause state read is the ordinary start). */
  let started = false;

  const consumer: ConsumerPort = options.consumers({
    groupId: pipeline.group,
    sessionTimeoutMs: settings.sessionTimeoutMs,
    rebalanceTimeoutMs: settings.maxPollIntervalMs + REBALANCE_MARGIN_MS,
    heartbeatIntervalMs,
    maxWaitMs: settings.pollTimeoutMs,
    maxBytesPerPartition: MAX_BYTES_PER_PARTITION,
    maxBytes: MAX_BYTES,
    // Only Kafka's own errors reach the client's retry: every handler error is caught in eachBatch.
    restartOnFailure: async (error) => {
      const restart = !stopping && failure === undefined;
      if (restart)
        logger.warn('kafka consumer crashed on a retriable error; restarting it', { pipeline: pipeline.name, ...loggedError(error) });
      return restart;
    },
  });

  const fail = (message: string, cause?: unknown, batch?: BatchPlace) => {
    if (failure) return;
    failure = new PipelineFailedError(pipeline.name, message, { cause, batch });
    progress.failed(cause ?? failure);
    try {
      consumer.pause([{ topic: pipeline.topic }]);
    } catch {
      // A consumer that crashed has already left its group: there is nothing to pause, and
      // a throw here would keep the failure from ever reaching the supervisor (a hang).
    }
    logger.error('pipeline failed', {
      pipeline: pipeline.name,
      ...(batch ? batchFields(batch) : {}),
      error: failure.message,
      cause: cause instanceof Error ? `${cause.name}: ${cause.message}` : cause === undefined ? undefined : String(cause),
      stack: cause instanceof Error ? cause.stack : undefined,
    });
    options.onFailure(failure);
  };

  /** Stops fetching every partition of the topic, including ones assigned later. */
  const pauseFetching = () => {
    try {
      consumer.pause([{ topic: pipeline.topic }]);
    } catch {
      // Not running yet (`run` creates kafkajs' group state): GROUP_JOIN pauses it.
    }
  };

  // The membership's life cycle (host/membership.ts): kafkajs' events are translated into it
  // here; the lanes, the batch loop, the commits and the progress record read it.
  const membership = new Membership();
  let memberId: string | undefined;
  /** The committed offsets read at the current assignment: the floor of its commits. */
  let floors: Promise<ReadonlyMap<number, bigint> | undefined> = Promise.resolve(undefined);
  const readFloors = (): Promise<ReadonlyMap<number, bigint> | undefined> => {
    if (options.readCommitted === undefined) return Promise.resolve(undefined);
    return options.readCommitted().catch((error: unknown) => {
      logger.warn('could not read the committed offsets at assignment; this generation commits without a floor', {
        pipeline: pipeline.name,
        group: pipeline.group,
        ...loggedError(error),
      });
      return undefined;
    });
  };
  membership.onChange(({ to, partitions, generation, cause }) => {
    if (to === 'joining') progress.joining();
    else if (to === 'revoking') {
      // A crash is recorded by progress.crashed() (it excuses nothing); a dropped member is not
      // ready and says so until it rejoined.
      if (cause === 'dropped') progress.memberDropped();
      else if (cause === 'rebalance') progress.left();
      logger.info('partitions revoked: the lanes drain, nothing more of them is written until the next assignment', {
        pipeline: pipeline.name,
        group: pipeline.group,
        cause,
        generation,
        partitions,
      });
    } else if (to === 'assigned') {
      floors = readFloors();
      progress.joined(partitions);
    }
  });
  consumer.onRebalancing(() => {
    incarnation?.revoked();
    membership.revoke('rebalance');
  });
  consumer.onGroupJoin((payload) => {
    memberId = payload.memberId;
    membership.assigned(payload.memberAssignment[pipeline.topic] ?? []);
    incarnation?.assigned(payload.memberAssignment[pipeline.topic] ?? []);
    // kafkajs emits this inside the join, before the first fetch of the new assignment; a
    // consumer it restarted after a crash is a new one whose pause state is empty: pause again.
    if (held()) pauseFetching();
    logger.info('joined the consumer group', {
      pipeline: pipeline.name,
      group: payload.groupId,
      assignment: payload.memberAssignment,
      generation: membership.generation,
    });
  });
  const stopWatchingFetches = consumer.onFetched(pipeline.topic, () => progress.fetched());
  consumer.onCrash((payload) => {
    membership.revoke('crashed');
    progress.crashed(payload.error);
    if (payload.restart || stopping) return;
    const verdict = crashFailure(pipeline, payload);
    fail(verdict.message, payload.error, verdict.place);
  });

  const loop = createBatchLoop({
    pipeline,
    settings,
    invoker,
    logger,
    metrics,
    progress,
    source,
    heartbeatIntervalMs,
    halted: () => failure !== undefined || held(),
    fail,
    seek: (topic, partition, offset) => consumer.seek({ topic, partition, offset }),
    concurrency,
    membership,
    committedAtAssignment: async (partition) => (await floors)?.get(partition),
  });

  // A position belongs to one topic incarnation (./topic-incarnation.ts).
  const incarnation =
    options.topicIds && options.readStartOffsets
      ? watchTopicIncarnation({
          pipeline: pipeline.name,
          topic: pipeline.topic,
          ids: options.topicIds,
          startOffsets: options.readStartOffsets,
          // The floors read at the assignment were the old incarnation's.
          drained: (work) =>
            loop.whileDrained(async () => {
              await work();
              floors = readFloors();
            }),
          seek: (partition, offset) => consumer.seek({ topic: pipeline.topic, partition, offset }),
          logger,
        })
      : undefined;

  return {
    fail: (message, cause) => fail(message, cause),
    async start() {
      started = true;
      progress.consumerStarted();
      if (!pauseKnown)
        logger.warn('pause state not read yet; the pipeline joins its group but fetches nothing until it is read', {
          pipeline: pipeline.name,
        });
      try {
        await consumer.connect();
        await consumer.subscribe({ topics: [pipeline.topic], fromBeginning: true });
      } catch (error) {
        throw new PipelineFailedError(
          pipeline.name,
          `cannot consume topic ${pipeline.topic} as group ${pipeline.group}: ${(error as Error).message}`,
          { cause: error },
        );
      }
      await incarnation?.start();
      // Every join and leave of this consumer (a rebalance, a restart after a crash) waits for
      // the writes in flight: no write of this member overlaps one of the partition's next owner.
      // A join revokes what the member holds first (nothing more is taken in), then joins once
      // the lanes drained.
      await consumer.run({
        partitionsConsumedConcurrently: concurrency,
        eachBatch: async (payload) => {
          try {
            if (incarnation !== undefined && !(await incarnation.admit())) return;
            await loop.eachBatch(payload);
          } catch (error) {
            // A bug in the host itself (e.g. an offset no Lambda event can carry): never a kafkajs retry.
            fail(`unexpected error in the host: ${String(error)}`, error);
          }
        },
        gate: (work, step) => {
          if (step.kind === 'leave' || membership.stopping) return loop.whileDrained(work);
          membership.revoke('rebalance');
          return loop.whileDrained(async () => {
            membership.joining();
            const { joins } = membership.snapshot();
            logger.info('joining the consumer group', { pipeline: pipeline.name, group: pipeline.group, join: joins });
            try {
              return await work();
            } finally {
              // Positions of the last generation: the new one starts from the committed offsets.
              if (step.forgottenSeeks > 0)
                logger.info('forgot the seeks of the last generation: every partition starts from its committed offset', {
                  pipeline: pipeline.name,
                  group: pipeline.group,
                  forgottenSeeks: step.forgottenSeeks,
                });
            }
          });
        },
      });
    },
    memberId: () => memberId,
    idle: () => loop.idle(),
    membership: () => membership.snapshot(),
    setPaused(next) {
      const first = !pauseKnown;
      pauseKnown = true;
      if (!first && (next === undefined) === (pause === undefined)) {
        pause = next;
        return;
      }
      pause = next;
      progress.setPaused(next !== undefined, next?.at.getTime());
      if (next) {
        pauseFetching();
        logger.info('pipeline paused: the batch in flight finishes and commits, then nothing is fetched', {
          pipeline: pipeline.name,
          by: next.by,
          at: next.at.toISOString(),
          reason: next.reason,
        });
        return;
      }
      // A failed pipeline stays paused: it is going down. Before the start nothing is paused in kafkajs.
      if (failure === undefined && started) {
        try {
          consumer.resume([{ topic: pipeline.topic }]);
        } catch {
          // Not running yet: nothing was paused.
        }
      }
      if (!first) logger.info('pipeline resumed', { pipeline: pipeline.name });
      else if (started) logger.info('pause state read: the pipeline is not paused; it fetches now', { pipeline: pipeline.name });
    },
    async stop() {
      stopping = true;
      incarnation?.stop();
      // Holds an assignment: only then can a batch be in flight, and kafkajs' leave not hang on a join.
      const assigned = membership.state === 'assigned' || membership.state === 'revoking';
      // Every wait (a back-off, a pause, a join) ends now; nothing more is taken in.
      membership.leaving();
      stopWatchingFetches();
      if (failure === undefined) progress.stopped();
      try {
        await leaveGroup({
          consumer,
          loop,
          logger,
          pipeline,
          settings,
          letGo: !assigned || failure !== undefined,
          failed: failure !== undefined,
        });
      } finally {
        membership.stopped();
      }
    },
  };
}
