/**
 * The consumer port (kafka/port.ts) on `@platformatic/kafka`, through its public API only.
 *
 * Membership is the client's: a `Consumer` joins the group, heartbeats in the background and
 * rejoins by itself when a heartbeat (or a commit) hears that the group rebalances. Every JoinGroup
 * it sends first asks the group option `protocolsMetadata` for the subscription's user data, and
 * waits for the answer: that is where the host's gate sits. The answer comes once the gate let the
 * join through (the host drained its writes), and the gate's step ends with the next
 * `consumer:group:join`. A JoinGroup sent again within the same join (MEMBER_ID_REQUIRED, a retry)
 * passes at once. The leave of a stop (`close`) runs inside the gate too.
 *
 * The data path is ours (./partition-fetcher.ts): per leader a loop of `consumer.fetch`, positions
 * that start at every join from the committed offsets (a seek never outlives its generation), and
 * per partition a handle for the host.
 */
import { Consumer, FetchIsolationLevels } from '@platformatic/kafka';
import type { ConsumerGroupJoinPayload } from '@platformatic/kafka';
import { StorageConsumerError } from '../../shared/errors.js';
import type { CommitRequest, ConsumerCrash, ConsumerOptions, ConsumerPort, GroupGate, GroupJoin, RunOptions } from '../port.js';
import type { platformaticConnection } from './connection.js';
import { GenerationEndedError } from './fetch-errors.js';
import { generationRequests } from './generation-requests.js';
import type { GenerationOfMember } from './generation-requests.js';
import { createPartitionFetcher } from './partition-fetcher.js';
import type { PartitionFetcher } from './partition-fetcher.js';

/** The subscription's user data in a JoinGroup: none (the round robin assignor reads none). */
const NO_USER_DATA = Buffer.alloc(0);

/** A join the gate let through, until the client says it joined (or gave up). */
interface OpenJoin {
  readonly joined: () => void;
  readonly failed: (error: unknown) => void;
}

/** The port over one `@platformatic/kafka` consumer in the options' group. */
export function platformaticConsumer(connection: ReturnType<typeof platformaticConnection>, options: ConsumerOptions): ConsumerPort {
  let gate: GroupGate | undefined;
  let openJoin: OpenJoin | undefined;
  /** The generation of the member as this port counts it: bumped by every join. */
  let generation = 0;
  /** Between a rebalance's first sign (or a join entering the gate) and the next join. */
  let rebalancing = false;
  let stopping = false;
  /** The member id and generation of each of this port's generations (the last few). */
  const members = new Map<number, GenerationOfMember>();
  const joinListeners: Array<(join: GroupJoin) => void> = [];
  const rebalanceListeners: Array<() => void> = [];
  const crashListeners: Array<(crash: ConsumerCrash) => void> = [];

  /**
   * The member's partitions are no longer its own: nothing more is fetched of them until the next
   * join. Its writes in flight still commit in their generation (the coordinator takes them until
   * the member rejoins, which the gate holds until they are done).
   */
  const endGeneration = () => {
    const first = !rebalancing;
    rebalancing = true;
    fetcher.suspend();
    if (first) for (const listener of rebalanceListeners) listener();
  };

  /** The JoinGroup's user data, once the host's gate let this join through. */
  const protocolsMetadata = (): Promise<Buffer> => {
    // The same join sends JoinGroup again (MEMBER_ID_REQUIRED, a retry): it passed the gate already.
    if (openJoin !== undefined) return Promise.resolve(NO_USER_DATA);
    endGeneration();
    if (gate === undefined) return Promise.resolve(NO_USER_DATA);
    // The member stays alive in its last generation while the gate holds its rejoin.
    const last = members.get(generation);
    const keepAlive =
      last === undefined ? undefined : setInterval(() => void requests.heartbeat(last).catch(() => undefined), options.heartbeatIntervalMs);
    return new Promise<Buffer>((answer, refuse) => {
      let answered = false;
      gate!(
        () =>
          new Promise<void>((joined, failed) => {
            clearInterval(keepAlive);
            openJoin = { joined, failed };
            answered = true;
            answer(NO_USER_DATA);
          }),
        { kind: 'join', forgottenSeeks: 0 },
      ).catch((error: unknown) => {
        clearInterval(keepAlive);
        if (!answered) refuse(error instanceof Error ? error : new Error(String(error)));
      });
    });
  };

  // A fetch waits up to maxWaitMs at the broker: its request must not time out first.
  const requestTimeoutMs = Math.max(30_000, options.maxWaitMs + 10_000);
  const consumer = new Consumer({
    ...connection,
    groupId: options.groupId,
    sessionTimeout: options.sessionTimeoutMs,
    rebalanceTimeout: options.rebalanceTimeoutMs,
    heartbeatInterval: options.heartbeatIntervalMs,
    timeout: requestTimeoutMs,
    autocommit: false,
    maxWaitTime: options.maxWaitMs,
    maxBytes: options.maxBytes,
    maxBytesPerPartition: options.maxBytesPerPartition,
    isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    protocolsMetadata,
  });

  const closeJoin = (error?: unknown) => {
    const join = openJoin;
    openJoin = undefined;
    if (join === undefined) return;
    if (error === undefined) join.joined();
    else join.failed(error);
  };

  /** A failure the client does not get over by itself: the host says whether the consumer starts again. */
  const crash = async (error: Error, fatal?: Pick<ConsumerCrash, 'unreadable'>): Promise<void> => {
    if (stopping) return;
    endGeneration();
    const restart = fatal === undefined ? await options.restartOnFailure(error).catch(() => false) : false;
    const report: ConsumerCrash = { error, restart, ...(fatal?.unreadable ? { unreadable: fatal.unreadable } : {}) };
    for (const listener of crashListeners) listener(report);
    if (restart && !stopping) void join();
  };

  /** Locates an unreadable batch, once one failed a fetch: every probe answers once, without the client's retries. */
  let prober: Consumer | undefined;
  const probe = (): Consumer => {
    if (prober === undefined) {
      prober = new Consumer({ ...connection, groupId: options.groupId, retries: 0, timeout: requestTimeoutMs });
      prober.topics.trackAll(...consumer.topics.current);
    }
    return prober;
  };

  const fetcher: PartitionFetcher = createPartitionFetcher({
    consumer,
    options,
    generation: () => generation,
    running: () => !stopping,
    probe,
    crash: (error, unreadable) => void crash(error, unreadable === undefined ? undefined : { unreadable }),
  });

  /** Joins (through the gate: ./protocolsMetadata); a failure the client gave up on is a crash. */
  const join = async (): Promise<void> => {
    try {
      await consumer.joinGroup({});
    } catch (error) {
      closeJoin(error);
      await crash(error instanceof Error ? error : new Error(String(error)));
    }
  };

  const requests = generationRequests(consumer, connection, requestTimeoutMs);

  consumer.on('consumer:group:join', (payload: ConsumerGroupJoinPayload) => {
    generation += 1;
    rebalancing = false;
    members.set(generation, { memberId: payload.memberId, generationId: payload.generationId ?? -1 });
    members.delete(generation - 8);
    const memberAssignment: Record<string, number[]> = {};
    for (const { topic, partitions } of payload.assignments ?? []) memberAssignment[topic] = [...partitions].sort((a, b) => a - b);
    fetcher.assign(memberAssignment);
    const joined: GroupJoin = {
      memberId: payload.memberId,
      groupId: payload.groupId,
      ...(payload.generationId === undefined ? {} : { generationId: payload.generationId }),
      memberAssignment,
    };
    for (const listener of joinListeners) listener(joined);
    closeJoin();
  });
  consumer.on('consumer:group:rebalance', () => endGeneration());
  consumer.on('consumer:group:leave', () => endGeneration());
  // Emitted when the client's own rejoin after a heartbeat failed: it heartbeats no more.
  consumer.on('error', (error: Error) => {
    closeJoin(error);
    void crash(error);
  });

  const commit = async (request: CommitRequest, fetchedIn: number): Promise<void> => {
    const member = members.get(fetchedIn);
    if (fetchedIn !== generation || member === undefined || stopping) throw new GenerationEndedError('offset commit');
    await requests.commit(request, member);
  };

  const heartbeat = async (fetchedIn: number): Promise<void> => {
    if (fetchedIn !== generation || rebalancing || stopping) throw new GenerationEndedError('group heartbeat');
  };

  return {
    async connect() {
      await consumer.metadata({ topics: [] });
    },
    async subscribe({ topics, fromBeginning }) {
      // Every topic must exist: the client would only find out at its first fetch.
      const metadata = await consumer.metadata({ topics, forceUpdate: true });
      for (const topic of topics) if (!metadata.topics.has(topic)) throw new StorageConsumerError(`topic ${topic} does not exist`);
      consumer.topics.trackAll(...topics);
      fetcher.subscribe(topics, fromBeginning);
    },
    async run({ gate: runGate, eachBatch, partitionsConsumedConcurrently }: RunOptions) {
      gate = runGate;
      fetcher.start({
        eachBatch,
        partitionsConsumedConcurrently,
        commit,
        heartbeat,
      });
      await join();
    },
    seek: ({ topic, partition, offset }) => fetcher.seek(topic, partition, BigInt(offset)),
    pause: (topics) => fetcher.pause(topics.map(({ topic }) => topic)),
    resume: (topics) => fetcher.resume(topics.map(({ topic }) => topic)),
    async disconnect() {
      stopping = true;
      fetcher.stop();
      // The leave first, on its own: the client's close would give a LeaveGroup up at once when
      // the coordinator cannot be reached, and say nothing of it (the member then stays in the
      // group until its session times out); its leaveGroup retries, and fails if it must.
      // (Its leaveGroup reads the subscription's metadata first, which fails once a topic is gone:
      // the close then tries a LeaveGroup on the coordinator's connection all the same.)
      const leave = async () => {
        try {
          await consumer.leaveGroup();
        } finally {
          await Promise.allSettled([consumer.close(), fetcher.stopped(), requests.close(), prober?.close()]);
        }
      };
      await (gate === undefined ? leave() : gate(leave, { kind: 'leave', forgottenSeeks: 0 }));
    },
    onGroupJoin: (listener) => {
      joinListeners.push(listener);
    },
    onRebalancing: (listener) => {
      rebalanceListeners.push(listener);
    },
    onCrash: (listener) => {
      crashListeners.push(listener);
    },
    onFetched: (topic, listener) => fetcher.onFetched(topic, listener),
  };
}
