/**
 * The platformatic consumer's data path (./consumer.ts): its own fetch loop over the client's
 * public `consumer.fetch`, because the client's MessagesStream has no per-partition seek, pause
 * or resolve.
 *
 * Positions are this module's. At every join each assigned partition starts from the group's
 * committed offset (none: the earliest when subscribed from the beginning, else the end); a seek
 * or a resolve of the last generation never carries over (a seek kept across a rejoin moved
 * committed offsets back, in kafkajs). Per leader one loop fetches every assigned partition that
 * is positioned, not paused and not in the host's hands, in one request; each partition's records
 * go to the host's `eachBatch` as a handle, at most `partitionsConsumedConcurrently` at once, and
 * the loop fetches again once they all returned. A fetch the client could not decode is located
 * (./unreadable-batch.ts) and reported as a crash the consumer does not restart from; any other
 * failure is retried against fresh metadata, and a persistent one is a crash the host decides on.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ListOffsetTimestamps, ResponseError } from '@platformatic/kafka';
import type { ClusterMetadata, Consumer, fetchV17 } from '@platformatic/kafka';
import type { CommitRequest, ConsumerOptions, PartitionHandle, PolledBatch, RunOptions, UnreadableBatch } from '../port.js';
import { UnknownTopicError } from '../port.js';
import { decodeFailureOf, protocolErrorsOf } from './fetch-errors.js';
import { sourceRecords } from './records.js';
import { resetOffsets, startOffsets } from './start-offsets.js';
import { locateUnreadableBatch } from './unreadable-batch.js';

type FetchResponse = fetchV17.FetchResponse;
type FetchResponsePartition = fetchV17.FetchResponsePartition;

/**
 * How long fetches (or the reads a join needs) may fail in a row, retried, before the host is
 * asked whether the consumer starts again: about kafkajs' five retries. Each failure of the client
 * already took its own retries (a second apart).
 */
const FAILING_FOR_MS = 5_000;

/** Counts failures in a row, and says when they lasted long enough to give up. */
function failureRun(): { failed(): boolean; succeeded(): void; readonly count: number } {
  let count = 0;
  let since = 0;
  return {
    failed() {
      if (count === 0) since = performance.now();
      count += 1;
      return count >= 2 && performance.now() - since >= FAILING_FOR_MS;
    },
    succeeded() {
      count = 0;
    },
    get count() {
      return count;
    },
  };
}
/** The first wait after a failed fetch; doubled per failure, 2.4 s at most (about kafkajs' 9 s to a crash). */
const RETRY_BASE_MS = 300;
const RETRY_MAX_MS = 2_400;

/** The wait before the `failures`-th retry. */
function retryDelayMs(failures: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** failures);
}

/** One assigned partition, in one generation. */
interface PartitionState {
  readonly topic: string;
  readonly partition: number;
  /** The next offset to fetch; `undefined` until the committed offset was read. */
  position: bigint | undefined;
  /** Bumped by every seek: a batch fetched before it is stale. */
  version: number;
  /** Its batch is in the host's hands (`eachBatch` has not returned). */
  busy: boolean;
}

/** What the fetcher is built from. */
export interface PartitionFetcherOptions {
  readonly consumer: Consumer;
  readonly options: ConsumerOptions;
  /** The member's generation now (./consumer.ts counts them). */
  readonly generation: () => number;
  /** False once the consumer stops. */
  readonly running: () => boolean;
  /** A consumer that fetches without retries, outside the group: it locates an unreadable batch. */
  readonly probe: () => Consumer;
  /** A failure the fetcher does not get over: with `unreadable`, fatal. */
  readonly crash: (error: Error, unreadable?: UnreadableBatch) => void;
}

/** What `run` adds: the host's batch callback, and the generation's commit. */
export interface FetcherRun {
  readonly eachBatch: RunOptions['eachBatch'];
  readonly partitionsConsumedConcurrently: number;
  readonly commit: (request: CommitRequest, fetchedIn: number) => Promise<void>;
  /** Rejects when the member left the generation `fetchedIn` (the client heartbeats by itself). */
  readonly heartbeat: (fetchedIn: number) => Promise<void>;
}

/** The data path of one consumer. */
export interface PartitionFetcher {
  subscribe(topics: readonly string[], fromBeginning: boolean): void;
  start(run: FetcherRun): void;
  /** A join's assignment: every partition starts again from its committed offset. */
  assign(assignment: Readonly<Record<string, readonly number[]>>): void;
  /** The member's partitions are no longer its own: nothing more is fetched until {@link assign}. */
  suspend(): void;
  seek(topic: string, partition: number, offset: bigint): void;
  pause(topics: readonly string[]): void;
  resume(topics: readonly string[]): void;
  onFetched(topic: string, listener: () => void): () => void;
  /** Nothing more is fetched. */
  stop(): void;
  /** Resolves once every loop ended. */
  stopped(): Promise<void>;
}

/** A wake-up every waiting loop hears. */
function signal(): { wait(ms: number): Promise<void>; wake(): void } {
  let wakers: Array<() => void> = [];
  return {
    wait: (ms) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wakers.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
    wake: () => {
      const woken = wakers;
      wakers = [];
      for (const wake of woken) wake();
    },
  };
}

/** Runs `work` over `items`, at most `limit` at once. */
async function concurrently<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}

/** The answer of a failed fetch, when the broker answered with partition errors (and the other partitions' records). */
function responseOf(error: unknown): FetchResponse | undefined {
  if (error instanceof ResponseError) return error.response as FetchResponse;
  if (error instanceof AggregateError)
    for (const inner of error.errors) if (inner instanceof ResponseError) return inner.response as FetchResponse;
  return undefined;
}

/** Creates the data path of `consumer`. */
export function createPartitionFetcher({
  consumer,
  options,
  generation,
  running,
  probe,
  crash,
}: PartitionFetcherOptions): PartitionFetcher {
  let topics: readonly string[] = [];
  let fromBeginning = true;
  let run: FetcherRun | undefined;
  let stopping = false;
  let suspended = true;
  /** The current assignment, per topic and partition. */
  let assigned = new Map<string, Map<number, PartitionState>>();
  const paused = new Set<string>();
  const fetchListeners = new Map<string, Set<() => void>>();
  const loops = new Map<number, Promise<void>>();
  const wakeUp = signal();
  let metadata: ClusterMetadata | undefined;
  let refreshing: Promise<ClusterMetadata | undefined> | undefined;
  /** Metadata refreshes in a row that found an assigned partition without a leader, and whether one is due. */
  const leaderless = failureRun();
  let leaderWait = false;

  const refreshMetadata = (forceUpdate: boolean): Promise<ClusterMetadata | undefined> => {
    refreshing ??= consumer
      .metadata({ topics: [...topics], forceUpdate, retries: 0 })
      .then(
        (fresh) => {
          metadata = fresh;
          return fresh;
        },
        () => metadata,
      )
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };

  const leaderOf = (state: PartitionState): number | undefined => metadata?.topics.get(state.topic)?.partitions[state.partition]?.leader;

  const allStates = (): PartitionState[] => [...assigned.values()].flatMap((partitions) => [...partitions.values()]);

  const fetchable = (state: PartitionState): boolean =>
    !suspended && !stopping && !paused.has(state.topic) && !state.busy && state.position !== undefined;

  const current = (state: PartitionState): boolean => assigned.get(state.topic)?.get(state.partition) === state;

  /** Starts a loop for every leader of an assigned partition that has none; refreshes the metadata when a leader is unknown. */
  const ensureLoops = () => {
    if (run === undefined || stopping || suspended) return;
    let unknown: PartitionState | undefined;
    for (const state of allStates()) {
      const leader = leaderOf(state);
      if (leader === undefined || leader < 0) {
        unknown ??= state;
        continue;
      }
      if (!loops.has(leader))
        loops.set(
          leader,
          leaderLoop(leader)
            // An error of the host's eachBatch (the host catches its own; another caller may not) or a
            // bug here: the loop ends, and the host decides whether the consumer starts again.
            .catch((error: unknown) => {
              if (!stopping) crash(error instanceof Error ? error : new Error(String(error)));
            })
            .finally(() => loops.delete(leader)),
        );
    }
    if (unknown === undefined) {
      leaderless.succeeded();
      return;
    }
    if (leaderWait) return;
    // No leader for a while (a deleted topic, above all): a failure like a failed fetch.
    if (leaderless.failed()) {
      leaderless.succeeded();
      const { topic, partition } = unknown;
      crash(
        metadata?.topics.has(topic)
          ? new Error(`no leader of topic ${topic} partition ${partition} is known`)
          : new UnknownTopicError(topic),
      );
      return;
    }
    leaderWait = true;
    void sleep(retryDelayMs(leaderless.count)).then(async () => {
      await refreshMetadata(true);
      leaderWait = false;
      ensureLoops();
    });
  };

  /** Where each partition of a generation starts: its committed offset, else the earliest or the end. */
  const position = async (fetchedIn: number, states: readonly PartitionState[]): Promise<void> => {
    const failures = failureRun();
    for (;;) {
      if (generation() !== fetchedIn || stopping) return;
      try {
        const byTopic = new Map<string, PartitionState[]>();
        for (const state of states) byTopic.set(state.topic, [...(byTopic.get(state.topic) ?? []), state]);
        for (const [topic, partitionStates] of byTopic) {
          const starts = await startOffsets(
            consumer,
            topic,
            partitionStates.map(({ partition }) => partition),
            fromBeginning,
          );
          for (const state of partitionStates) {
            // A seek since the join (the host's own) says where the partition goes on.
            if (state.position !== undefined || state.version !== 0) continue;
            const start = starts.get(state.partition);
            if (start !== undefined) state.position = start;
          }
        }
        await refreshMetadata(false);
        ensureLoops();
        wakeUp.wake();
        return;
      } catch (error) {
        if (failures.failed()) {
          if (generation() === fetchedIn && !stopping) crash(error instanceof Error ? error : new Error(String(error)));
          return;
        }
        await sleep(retryDelayMs(failures.count));
      }
    }
  };

  /** The offsets a partition that answered OFFSET_OUT_OF_RANGE goes on from: the earliest or the end, as the subscription says. */
  const resetOutOfRange = async (states: readonly PartitionState[]): Promise<void> => {
    for (const state of states) {
      const version = state.version;
      const start = (await resetOffsets(consumer, state.topic, [state.partition], fromBeginning)).get(state.partition);
      if (start !== undefined && state.version === version && current(state)) state.position = start;
    }
  };

  const fetchOnce = (
    node: number,
    states: readonly PartitionState[],
    partitionMaxBytes: number,
    offsets?: ReadonlyMap<PartitionState, bigint>,
    by: Consumer = consumer,
  ) => {
    const byTopic = new Map<string, PartitionState[]>();
    for (const state of states) byTopic.set(state.topic, [...(byTopic.get(state.topic) ?? []), state]);
    return by.fetch({
      node,
      maxWaitTime: options.maxWaitMs,
      maxBytes: options.maxBytes,
      topics: [...byTopic].map(([topic, partitionStates]) => ({
        topicId: metadata?.topics.get(topic)?.id ?? topic,
        partitions: partitionStates.map((state) => ({
          partition: state.partition,
          fetchOffset: offsets?.get(state) ?? (state.position as bigint),
          partitionMaxBytes,
          currentLeaderEpoch: -1,
          lastFetchedEpoch: -1,
        })),
      })),
    });
  };

  /** A partition's fetched records as a handle for the host. */
  const handleOf = (
    state: PartitionState,
    answer: FetchResponsePartition,
    fetchedAt: bigint,
    fetchedIn: number,
  ): PartitionHandle | undefined => {
    const { records, lastOffset } = sourceRecords(
      state.topic,
      state.partition,
      answer.records ?? [],
      fetchedAt,
      answer.abortedTransactions,
    );
    if (lastOffset === null || lastOffset < fetchedAt) return undefined;
    if (records.length === 0) {
      // Only transaction markers, aborted records or a gap: nothing for the host, the position moves past them.
      state.position = lastOffset + 1n;
      return undefined;
    }
    const version = state.version;
    const first = records[0]?.offset.toString() ?? null;
    const batch: PolledBatch = {
      topic: state.topic,
      partition: state.partition,
      highWatermark: answer.highWatermark.toString(),
      records,
      firstOffset: () => first,
      lastOffset: () => lastOffset.toString(),
    };
    const active = run as FetcherRun;
    return {
      batch,
      isRunning: () => running() && !stopping,
      isStale: () => state.version !== version || !current(state) || generation() !== fetchedIn,
      heartbeat: () => active.heartbeat(fetchedIn),
      resolveOffset: (offset) => {
        if (state.version === version && current(state)) state.position = BigInt(offset) + 1n;
      },
      commitOffsetsIfNecessary: (request) => active.commit(request, fetchedIn),
    };
  };

  /** One leader's loop: fetch its partitions, hand them over, again; it ends once it leads none of them. */
  const leaderLoop = async (node: number): Promise<void> => {
    const failures = failureRun();
    while (!stopping && run !== undefined) {
      const mine = allStates().filter((state) => leaderOf(state) === node);
      if (mine.length === 0 || suspended) return;
      const picked = mine.filter(fetchable);
      if (picked.length === 0) {
        await wakeUp.wait(options.maxWaitMs);
        continue;
      }
      const fetchedIn = generation();
      const at = new Map(picked.map((state) => [state, { position: state.position as bigint, version: state.version }]));
      let answer: FetchResponse;
      try {
        answer = await fetchOnce(node, picked, options.maxBytesPerPartition);
        failures.succeeded();
      } catch (error) {
        if (stopping) return;
        const decodeFailure = decodeFailureOf(error);
        if (decodeFailure !== undefined) {
          const unreadable = await locateUnreadableBatch({
            partitions: picked.map(({ topic, partition, position }) => ({ topic, partition, position: position as bigint })),
            failure: decodeFailure,
            maxBytesPerPartition: options.maxBytesPerPartition,
            fetch: ({ topic, partition }, offset, partitionMaxBytes) => {
              const state = assigned.get(topic)?.get(partition) as PartitionState;
              return fetchOnce(node, [state], partitionMaxBytes, new Map([[state, offset]]), probe());
            },
            end: async ({ topic, partition }) =>
              (
                await consumer.listOffsets({
                  topics: [topic],
                  partitions: { [topic]: [partition] },
                  timestamp: ListOffsetTimestamps.LATEST,
                })
              ).get(topic)?.[partition],
          });
          crash(error instanceof Error ? error : new Error(String(error)), unreadable);
          return;
        }
        const partial = responseOf(error);
        const outOfRange = protocolErrorsOf(error).has('OFFSET_OUT_OF_RANGE');
        if (partial === undefined || !outOfRange) {
          if (failures.failed()) {
            crash(error instanceof Error ? error : new Error(String(error)));
            return;
          }
          await sleep(retryDelayMs(failures.count));
          await refreshMetadata(true);
          ensureLoops();
          continue;
        }
        answer = partial;
      }
      for (const topic of new Set(picked.map(({ topic }) => topic))) for (const listener of fetchListeners.get(topic) ?? []) listener();
      const handles: Array<{ state: PartitionState; handle: PartitionHandle }> = [];
      const outOfRange: PartitionState[] = [];
      for (const topicAnswer of answer.responses) {
        const topic = [...(metadata?.topics ?? [])].find(([, { id }]) => id === topicAnswer.topicId)?.[0] ?? topicAnswer.topicId;
        for (const partitionAnswer of topicAnswer.partitions) {
          const state = assigned.get(topic)?.get(partitionAnswer.partitionIndex);
          const asked = state === undefined ? undefined : at.get(state);
          // Sought, paused, reassigned or suspended meanwhile: this answer is no longer what comes next.
          if (state === undefined || asked === undefined || state.version !== asked.version || state.position !== asked.position) continue;
          if (suspended || paused.has(topic) || generation() !== fetchedIn) continue;
          if (partitionAnswer.errorCode === 1) outOfRange.push(state);
          if (partitionAnswer.errorCode !== 0) continue;
          const handle = handleOf(state, partitionAnswer, asked.position, fetchedIn);
          if (handle !== undefined) handles.push({ state, handle });
        }
      }
      if (outOfRange.length > 0) await resetOutOfRange(outOfRange).catch(() => undefined);
      await concurrently(handles, run.partitionsConsumedConcurrently, async ({ state, handle }) => {
        // The member's generation ended while earlier batches of this fetch were written: not its to hand over.
        if (suspended || stopping || generation() !== fetchedIn || !current(state)) return;
        state.busy = true;
        try {
          await run?.eachBatch(handle);
        } finally {
          state.busy = false;
        }
      });
    }
  };

  return {
    subscribe(subscribed, earliest) {
      topics = [...subscribed];
      fromBeginning = earliest;
    },
    start(started) {
      run = started;
    },
    assign(assignment) {
      const fetchedIn = generation();
      assigned = new Map(
        Object.entries(assignment).map(([topic, partitions]) => [
          topic,
          new Map(partitions.map((partition) => [partition, { topic, partition, position: undefined, version: 0, busy: false }])),
        ]),
      );
      suspended = false;
      void position(fetchedIn, allStates());
    },
    suspend() {
      suspended = true;
      wakeUp.wake();
    },
    seek(topic, partition, offset) {
      const state = assigned.get(topic)?.get(partition);
      if (state === undefined) return;
      state.version += 1;
      state.position = offset;
      wakeUp.wake();
    },
    pause(paused_) {
      for (const topic of paused_) paused.add(topic);
    },
    resume(resumed) {
      for (const topic of resumed) paused.delete(topic);
      wakeUp.wake();
    },
    onFetched(topic, listener) {
      const listeners = fetchListeners.get(topic) ?? new Set();
      fetchListeners.set(topic, listeners);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      stopping = true;
      wakeUp.wake();
    },
    async stopped() {
      await Promise.all(loops.values());
    },
  };
}
