/**
 * A position belongs to one topic incarnation. A topic deleted and re-created under the same name
 * is a new topic whose offsets start again, but the Kafka client keeps fetching each partition
 * from where it was in the old one: once the new topic holds more records than that position,
 * every record before it would be skipped, with no error and a lag of 0. The watch here knows
 * the incarnation (Kafka's topic id) its consumer reads, and notices when it changes:
 *
 * - at the start, before the consumer joins (the baseline), at every assignment, every
 *   `intervalMs` (a paused consumer too), and before each fetched batch is taken in
 *   ({@link TopicIncarnation.admit}: a batch is taken in only once a read of the topic's id that
 *   started after the batch arrived found the incarnation unchanged; reads are shared by every
 *   batch waiting, one Metadata round trip per fetch);
 * - on a change it logs once, then, with nothing of the topic being written or waiting, moves
 *   each assigned partition's next fetch to where the group reads the new incarnation: its
 *   committed offset (Kafka drops a deleted topic's group offsets with it), or, with none, its
 *   start. Batches that arrive meanwhile are not taken in: the ones fetched before the seeks are
 *   stale (a seek is pending, and the client fetches again only after its batches are handed
 *   over), so the next batch of each partition is the new incarnation's from that offset.
 * - While the topic does not exist nothing is taken in; when it comes back with a new id the
 *   change above applies.
 *
 * It knows no Kafka client: the topic's id, the group's start offsets, the drain and the seek
 * are its caller's (host/topic-consumer.ts wires them).
 */
import type { CoreLogger } from '../shared/logger.js';
import { loggedError } from '../shared/errors.js';

/** How often the topic's id is read besides the assignments and the batches (a paused consumer too). */
const DEFAULT_INTERVAL_MS = 5_000;
/** A read that failed is tried again after this long while a batch or a change waits for it. */
const RETRY_MS = 1_000;

/** A topic's identity as the watch reads it: its id, `undefined` when it does not exist. */
export interface TopicIdSource {
  read(topics: readonly string[]): Promise<ReadonlyArray<{ readonly topic: string; readonly id: string | undefined }>>;
}

/** What a pipeline's topic incarnation watch is built from. */
export interface TopicIncarnationOptions {
  readonly pipeline: string;
  readonly topic: string;
  /** Reads the topic's id (the Kafka client's `topicIds()`, kafka/port.ts). */
  readonly ids: TopicIdSource;
  /**
   * Where the group reads each partition of the topic now: its committed offset, or with none the
   * partition's start (kafka/lag.ts `groupStartOffsets`).
   */
  readonly startOffsets: () => Promise<ReadonlyMap<number, string>>;
  /**
   * Runs `work` once nothing of the topic is being written and nothing fetched waits (what waits
   * is dropped without a seek): the batch loop's `whileDrained`.
   */
  readonly drained: (work: () => Promise<void>) => Promise<void>;
  /** Moves a partition's next fetch to `offset`. */
  readonly seek: (partition: number, offset: string) => void;
  readonly logger: CoreLogger;
  readonly intervalMs?: number;
}

/** One pipeline's watch over the incarnation of its topic (see the file's comment). */
export interface TopicIncarnation {
  /** Reads the baseline (before the consumer joins) and starts the periodic reads. Never rejects. */
  start(): Promise<void>;
  /** The member's partitions after a join: the ones a change moves. Checks the incarnation at once. */
  assigned(partitions: readonly number[]): void;
  /** The member's partitions are no longer its own (a rebalance, a leave). */
  revoked(): void;
  /**
   * Whether a batch fetched before this call may be taken in: true once a read started after the
   * call found the incarnation the consumer reads; false when the topic changed (the change is
   * handled first: the batch is stale) or does not exist, or the watch stopped.
   */
  admit(): Promise<boolean>;
  /** The id of the incarnation the consumer reads, `undefined` before the first read. */
  current(): string | undefined;
  /** Stops the periodic reads; waiting batches are not taken in. */
  stop(): void;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Creates a pipeline's topic incarnation watch. */
export function watchTopicIncarnation(options: TopicIncarnationOptions): TopicIncarnation {
  const { pipeline, topic, ids, logger } = options;
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
  /** The id of the incarnation the consumer reads. */
  let known: string | undefined;
  let gone = false;
  /** Changes noticed so far: a batch that waited across one is stale. */
  let changes = 0;
  let handling: Promise<void> | undefined;
  let owned: readonly number[] = [];
  let stopped = false;
  let readFailing = false;
  /** The cluster cannot give topic ids (a broker before Kafka 2.8): the watch admits every batch. */
  let unreadable = false;
  let timer: NodeJS.Timeout | undefined;
  /** The read under way, and the one that starts next (shared by everyone who asked meanwhile). */
  let running: Promise<void> | undefined;
  let pending: Promise<void> | undefined;

  /** Forgets every position of the old incarnation: each assigned partition goes where the group reads the new one. */
  const moveToNewIncarnation = async (previous: string, next: string) => {
    logger.warn(
      `topic ${topic} was deleted and re-created (id ${previous} -> ${next}): positions of the old incarnation forgotten; ` +
        'reading the new one from its committed offsets or its start',
      { pipeline, topic, previousTopicId: previous, topicId: next, partitions: [...owned] },
    );
    await options.drained(async () => {
      for (;;) {
        try {
          const starts = await options.startOffsets();
          for (const partition of owned) {
            const offset = starts.get(partition);
            if (offset !== undefined) options.seek(partition, offset);
          }
          return;
        } catch (error) {
          logger.warn(`cannot read where the group reads the new incarnation of topic ${topic}; trying again`, {
            pipeline,
            topic,
            ...loggedError(error),
          });
          if (stopped) return;
          await sleep(RETRY_MS);
        }
      }
    });
  };

  const take = (id: string | undefined) => {
    if (id === undefined) {
      if (!gone && known !== undefined)
        logger.warn(`topic ${topic} no longer exists (id ${known}): nothing is fetched from it until it is re-created`, {
          pipeline,
          topic,
          topicId: known,
        });
      gone = true;
      return;
    }
    gone = false;
    if (known === undefined || id === known) {
      known = id;
      return;
    }
    const previous = known;
    known = id;
    changes += 1;
    handling = moveToNewIncarnation(previous, id).finally(() => (handling = undefined));
  };

  /** One read; false when it failed (warned once until a read succeeds). Waits for a change it found to be handled. */
  const readOnce = async (): Promise<boolean> => {
    try {
      const [identity] = await ids.read([topic]);
      if (readFailing) logger.info(`the identity of topic ${topic} is readable again`, { pipeline, topic });
      readFailing = false;
      take(identity?.id);
      await handling;
      return true;
    } catch (error) {
      if ((error as { lasting?: unknown }).lasting === true) {
        unreadable = true;
        logger.warn(`topic ids cannot be read from this cluster: a deletion and re-creation of topic ${topic} is not noticed`, {
          pipeline,
          topic,
          ...loggedError(error),
        });
        return true;
      }
      if (!readFailing)
        logger.warn(`cannot read the identity of topic ${topic}; fetched batches wait for it`, { pipeline, topic, ...loggedError(error) });
      readFailing = true;
      return false;
    }
  };

  /** One read, tried again until it succeeds or the watch stops. */
  const readUntilDone = async (): Promise<void> => {
    while (!stopped && !unreadable && !(await readOnce())) await sleep(RETRY_MS);
  };

  /**
   * Resolves once a read that started after this call is done. The read starts on the next turn
   * of the event loop (after the one under way, if any): the batches of one fetch, handed over
   * together, share it.
   */
  const freshRead = (): Promise<void> => {
    pending ??= (async () => {
      await running;
      await new Promise<void>((resolve) => setImmediate(resolve));
      pending = undefined;
      running = readUntilDone().finally(() => (running = undefined));
      await running;
    })();
    return pending;
  };

  const schedule = () => {
    if (stopped || unreadable) return;
    timer = setTimeout(() => void freshRead().then(schedule), intervalMs);
    timer.unref();
  };

  return {
    async start() {
      // One attempt: a broker that does not answer now is the consumer's own start's business.
      await readOnce();
      schedule();
    },
    assigned(partitions) {
      owned = [...partitions];
      void freshRead();
    },
    revoked() {
      owned = [];
    },
    async admit() {
      if (unreadable) return true;
      const before = changes;
      const during = handling !== undefined;
      await freshRead();
      await handling;
      if (unreadable) return !stopped;
      return !stopped && !during && changes === before && !gone && known !== undefined;
    },
    current: () => known,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
