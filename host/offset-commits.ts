/**
 * The offset commits of one pipeline's batch loop (./batch-loop.ts): each stored event's offsets
 * are committed once its rows are; a commit that fails is retried (1 s, 2 s, 4 s ... 30 s) until
 * it succeeds, unless a later commit of its partition was asked for (that one carries it) or a
 * join or a leave hands the partition on ({@link OffsetCommits.forget}). Without the retry, a
 * partition that receives nothing more would keep its stored records uncommitted, and show lag,
 * until a rebalance or a restart delivered them again (docs/design.md section 3, "Offset semantics
 * the host reproduces": a commit failure).
 *
 * The last line of defence of "a committed offset never moves back unless an operator moved it":
 * a commit below the offset this member read as committed when it was assigned the partition
 * ({@link OffsetCommitsOptions.floorOf}) is a bug of the host; it is refused, logged as one and
 * counted (`storage_consumer_commits_refused_total`), never sent.
 */
import { backoffDelayMs } from '../shared/backoff.js';
import { batchFields } from '../shared/batch-report.js';
import type { CoreLogger } from '../shared/logger.js';
import type { PipelineMetrics } from './metrics.js';
import type { PartitionOffset } from './offsets.js';
import type { PartitionHandle } from '../kafka/port.js';
import type { PipelineProgress } from './progress.js';
import { loggedError } from '../shared/errors.js';

/** Consecutive failed commits after which a pipeline fails (a livelock becomes a crash); retries do not count. */
export const MAX_COMMIT_FAILURES = 5;

/** The first retry of a failed commit comes after this; each next one after twice as long, up to the cap. */
export const COMMIT_RETRY_BASE_MS = 1_000;
const COMMIT_RETRY_MAX_MS = 30_000;

export type { CommitRequest } from '../kafka/port.js';

/** What a commit needs of the Kafka client: the part of the port's partition handle (kafka/port.ts) it calls. */
export type CommitPort = Pick<PartitionHandle, 'isRunning' | 'commitOffsetsIfNecessary'>;

/** Where the committed event sits, for log lines (topic, partition and offsets). */
export interface CommitPlace {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: string;
  readonly lastOffset: string;
}

/** A stored event whose commit failed, kept until a retry or a later commit of its partition succeeds. */
export interface PendingCommit {
  readonly port: CommitPort;
  readonly offset: string;
  readonly place: CommitPlace;
}

/**
 * The commits' state, explicit: the consecutive failed commits (after {@link MAX_COMMIT_FAILURES}
 * the pipeline fails), the highest offset each partition's commits asked for, the failed commits
 * waiting for their retry (one per partition, the highest), and the retries made in a row.
 */
export interface OffsetCommitsState {
  failuresInRow: number;
  readonly askedFor: Map<number, bigint>;
  readonly pending: Map<number, PendingCommit>;
  retries: number;
}

/** What the commits are built from. */
export interface OffsetCommitsOptions {
  readonly pipeline: { readonly name: string; readonly topic: string };
  readonly logger: CoreLogger;
  readonly metrics?: Pick<PipelineMetrics, 'commitFailed' | 'commitRefused'>;
  readonly progress: Pick<PipelineProgress, 'committed'>;
  /** Fails the pipeline (once): {@link MAX_COMMIT_FAILURES} commits in a row failed. */
  readonly fail: (message: string, cause: unknown, place: CommitPlace) => void;
  /**
   * The offset this member read as committed when it was assigned `partition` in its current
   * generation (`undefined`: none, or it could not be read): no commit goes below it.
   */
  readonly floorOf?: (partition: number) => Promise<bigint | undefined>;
}

/** The commits of one pipeline. */
export interface OffsetCommits {
  readonly state: OffsetCommitsState;
  /** Commits `offsets` (a stored event's); a failure is logged, counted and retried later, never thrown. */
  commit(port: CommitPort, offsets: readonly PartitionOffset[], place: CommitPlace): Promise<void>;
  /**
   * Forgets the pending retries and the offsets asked for: a join or a leave hands the partitions
   * on, the new generation starts from the committed offsets, and a commit of the old one would be
   * refused.
   */
  forget(): void;
}

/** Creates the offset commits of one pipeline. */
export function createOffsetCommits(options: OffsetCommitsOptions): OffsetCommits {
  const { pipeline, logger, metrics, progress } = options;
  const state: OffsetCommitsState = { failuresInRow: 0, askedFor: new Map(), pending: new Map(), retries: 0 };
  let retryTimer: NodeJS.Timeout | undefined;
  /** The jittered wait of the retry scheduled last, as the log line tells it. */
  let retryInMs = 0;

  /** The offsets at or above their partition's floor; the others are refused (a bug: see the file's comment). */
  const aboveFloor = async (offsets: readonly PartitionOffset[], place: CommitPlace): Promise<readonly PartitionOffset[]> => {
    if (options.floorOf === undefined) return offsets;
    const kept: PartitionOffset[] = [];
    for (const entry of offsets) {
      const floor = await options.floorOf(entry.partition);
      if (floor === undefined || BigInt(entry.offset) >= floor) {
        kept.push(entry);
        continue;
      }
      metrics?.commitRefused();
      logger.error('bug: an offset commit below the committed offset read at assignment was refused, not sent', {
        pipeline: pipeline.name,
        ...batchFields(place),
        commitPartition: entry.partition,
        offset: entry.offset,
        committedAtAssignment: floor.toString(),
        action:
          'nothing is lost (the commit would have moved the offset back); please report this line: the rows are stored, ' +
          'and the records below the committed offset were fetched again by a position this member should have forgotten',
      });
    }
    return kept;
  };

  const send = async (port: CommitPort, requested: readonly PartitionOffset[], place: CommitPlace) => {
    const offsets = await aboveFloor(requested, place);
    if (offsets.length === 0) return;
    for (const { partition, offset } of offsets) {
      const asked = BigInt(offset);
      if (asked > (state.askedFor.get(partition) ?? -1n)) state.askedFor.set(partition, asked);
    }
    await port.commitOffsetsIfNecessary({
      topics: [{ topic: pipeline.topic, partitions: offsets.map(({ partition, offset }) => ({ partition, offset })) }],
    });
    for (const { partition, offset } of offsets) {
      progress.committed(partition, offset);
      const pending = state.pending.get(partition);
      if (pending !== undefined && BigInt(pending.offset) <= BigInt(offset)) state.pending.delete(partition);
    }
    if (state.pending.size === 0) state.retries = 0;
  };

  /**
   * Retries the failed commits that no later commit of their partition superseded (one asked for
   * since, even one still in flight, would be moved back by it), until each succeeds, its
   * consumer stops, or a rebalance hands its partition on.
   */
  const retry = async () => {
    retryTimer = undefined;
    state.retries += 1;
    for (const [partition, pending] of [...state.pending]) {
      // Forgotten (a join or a leave) or carried by a later commit while an earlier retry was sent.
      if (state.pending.get(partition) !== pending) continue;
      if (!pending.port.isRunning()) {
        state.pending.delete(partition);
        continue;
      }
      if (BigInt(pending.offset) < (state.askedFor.get(partition) ?? -1n)) continue;
      const fields = { pipeline: pipeline.name, ...batchFields(pending.place), offset: pending.offset, retry: state.retries };
      try {
        await send(pending.port, [{ topic: pipeline.topic, partition, offset: pending.offset }], pending.place);
        state.failuresInRow = 0;
        logger.info('offset commit retried: committed', fields);
      } catch (error) {
        metrics?.commitFailed();
        logger.warn('offset commit retry failed; retrying later', { ...fields, ...loggedError(error) });
      }
    }
    scheduleRetry();
  };

  const scheduleRetry = () => {
    if (state.pending.size === 0 || retryTimer !== undefined) return;
    retryInMs = backoffDelayMs(state.retries + 1, COMMIT_RETRY_BASE_MS, COMMIT_RETRY_MAX_MS);
    retryTimer = setTimeout(() => void retry(), retryInMs);
    retryTimer.unref();
  };

  // The fetch position was resolved when the batch entered its lane: a commit only commits.
  const commit = async (port: CommitPort, offsets: readonly PartitionOffset[], place: CommitPlace) => {
    try {
      await send(port, offsets, place);
      state.failuresInRow = 0;
    } catch (error) {
      for (const { partition, offset } of offsets) {
        const pending = state.pending.get(partition);
        if (pending === undefined || BigInt(pending.offset) <= BigInt(offset)) state.pending.set(partition, { port, offset, place });
      }
      scheduleRetry();
      state.failuresInRow += 1;
      metrics?.commitFailed();
      logger.warn('offset commit failed; the rows are stored, so a redelivery would only repeat them', {
        pipeline: pipeline.name,
        ...batchFields(place),
        offsets,
        failuresInRow: state.failuresInRow,
        retryInMs,
        ...loggedError(error),
      });
      if (state.failuresInRow >= MAX_COMMIT_FAILURES) options.fail(`${state.failuresInRow} offset commits in a row failed`, error, place);
    }
  };

  const forget = () => {
    state.pending.clear();
    state.askedFor.clear();
    state.retries = 0;
    clearTimeout(retryTimer);
    retryTimer = undefined;
  };

  return { state, commit, forget };
}
