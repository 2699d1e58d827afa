/**
 * Fetching that never waits for writing (docs/design.md section 3, "Fetching ahead"): per assigned
 * partition a lane that writes its polled batches one event at a time, in offset order, while the
 * Kafka client already fetches what comes next. A lane holds at most the batch it writes and one
 * more fetched batch ({@link WAITING_PER_LANE}); a third waits in the client's callback until
 * there is room, which holds the next fetch of the whole consumer: that is the memory bound.
 *
 * Offsets. A batch's offsets are resolved (the client's next fetch position) when it enters the
 * lane, not when it is stored: commits stay the lane's own, after each stored event, so nothing is
 * committed ahead. Whatever drops events a lane has taken in while the partition is still this
 * member's (a pause, a failure, a step that left the rest) moves the fetch position back to the
 * first of them, unless the fetch position already moved back (a redelivery's seek, or a seek
 * still pending): a dropped event is always fetched again, and a partition's writes never
 * overlap or reorder. A partition that is no longer this member's ({@link PartitionLanesOptions.owns}:
 * revoked by a rebalance, the broker dropped the member, a stop) is dropped without a seek: its
 * next owner starts from the committed offset, and a seek kept for it would move that offset
 * back once the partition came back here (host/membership.ts).
 *
 * A rebalance or a leave first drains every lane ({@link PartitionLanes.drain}): the events in
 * flight finish (and commit, or fail to), the waiting ones are dropped without a seek (the new
 * generation starts from the committed offsets), and only then does the consumer rejoin: no write
 * of this member overlaps a write of the partition's next owner.
 */
import type { HostEvent } from './event-cut.js';

/** Fetched batches a lane holds besides the one it writes. */
const WAITING_PER_LANE = 1;

/**
 * How one event ended, for its lane: go on; leave the rest, moving the fetch position back to it
 * (`leave`); or leave the rest where the fetch position already is (`rewound`: the step sought
 * back to a redelivery, or a seek is pending).
 */
export type LaneStepOutcome = 'next' | 'leave' | 'rewound';

/** The part of a polled batch a lane needs: whether it is still this consumer's to write. */
export interface LaneBatchPort {
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** True while a seek of the partition is pending: the batch is no longer what comes next. */
  isStale(): boolean;
  /** Marks records consumed up to `offset` (inclusive): the client's next fetch of the partition starts after it. */
  resolveOffset(offset: string): void;
}

/** What the lanes are built from. */
export interface PartitionLanesOptions<Port extends LaneBatchPort> {
  /** Events invoked at the same time over all lanes (the database pool, or Lambda's concurrency). */
  readonly concurrency: number;
  /** True when nothing may be invoked now (failed, paused, pause state unread). */
  readonly halted: () => boolean;
  /**
   * Whether the partition is this member's to write, in the membership generation the batch was
   * taken in under (host/membership.ts `owns`): false once it was revoked or a stop began.
   */
  readonly owns: (partition: number, generation: number) => boolean;
  /** The membership generation now: a batch is taken in under it. */
  readonly generation: () => number;
  /** One event: invoke, decide, commit or redeliver. */
  readonly step: (event: HostEvent, port: Port) => Promise<LaneStepOutcome>;
  /** Moves a partition's fetch position back to `offset`. */
  readonly seek: (partition: number, offset: string) => void;
  /** A step threw (a bug of the host): the lane drops the rest, moving the fetch position back. */
  readonly onError: (error: unknown, event: HostEvent, port: Port) => void;
}

/** The lanes of one pipeline's consumer. */
export interface PartitionLanes<Port extends LaneBatchPort> {
  /**
   * Takes a polled batch's events into the partition's lane and resolves its offsets; resolves as
   * soon as the lane has room for it (at once, unless a batch already waits there). Takes nothing
   * when the pipeline is halted, the consumer stopping or the batch stale.
   */
  enqueue(partition: number, port: Port, events: readonly HostEvent[]): Promise<void>;
  /**
   * Runs `work` (kafkajs' join or leave) with every lane drained: what waits is dropped (no seek),
   * the events in flight finish first, and no batch is taken in until `work` is over.
   */
  whileDrained<T>(work: () => Promise<T>): Promise<T>;
  /** Resolves once no lane has anything to do (tests, and the stop). */
  idle(): Promise<void>;
  /** Events waiting or in flight, per partition (the status and the tests). */
  depth(): ReadonlyMap<number, number>;
}

interface Queued<Port> {
  readonly port: Port;
  readonly events: readonly HostEvent[];
  /** The membership generation the batch was taken in under. */
  readonly memberGeneration: number;
}

interface Lane<Port> {
  readonly partition: number;
  /** Fetched batches waiting for the one in flight. */
  queue: Array<Queued<Port>>;
  /** The batch being written and the index of its next event; `undefined` when none. */
  current: { readonly batch: Queued<Port>; next: number } | undefined;
  /** Bumped by every drop: a batch taken in under an older generation is not written. */
  generation: number;
  /** The lane's worker while it runs. */
  worker: Promise<void> | undefined;
  /** Callbacks waiting for room in the queue. */
  readonly roomWaiters: Array<() => void>;
}

/** A counting semaphore: at most `size` holders at once, served in arrival order. */
function slots(size: number): { acquire(): Promise<void>; release(): void } {
  let free = size;
  const waiting: Array<() => void> = [];
  return {
    acquire: () => {
      if (free > 0) {
        free -= 1;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    release: () => {
      const next = waiting.shift();
      if (next) next();
      else free += 1;
    },
  };
}

/** The first offset of an event (the partition's only one: host events carry one partition). */
function firstOffsetOf(event: HostEvent | undefined): string | undefined {
  return event?.partitions[0]?.offsets[0];
}

/** The last offset of the last event. */
function lastOffsetOf(events: readonly HostEvent[]): string | undefined {
  return events.at(-1)?.partitions[0]?.offsets.at(-1);
}

/** Creates the lanes of one pipeline's consumer. */
export function createPartitionLanes<Port extends LaneBatchPort>(options: PartitionLanesOptions<Port>): PartitionLanes<Port> {
  const lanes = new Map<number, Lane<Port>>();
  const invoking = slots(Math.max(1, options.concurrency));
  /** Joins and leaves under way: while one is, no batch is taken in. */
  let drained = 0;

  const laneOf = (partition: number): Lane<Port> => {
    let lane = lanes.get(partition);
    if (lane === undefined) {
      lane = { partition, queue: [], current: undefined, generation: 0, worker: undefined, roomWaiters: [] };
      lanes.set(partition, lane);
    }
    return lane;
  };

  const owned = (partition: number, batch: Queued<Port>) => options.owns(partition, batch.memberGeneration);
  const admissible = (partition: number, batch: Queued<Port>) =>
    !options.halted() && owned(partition, batch) && batch.port.isRunning() && !batch.port.isStale();

  const wakeRoomWaiters = (lane: Lane<Port>) => {
    for (const wake of lane.roomWaiters.splice(0)) wake();
  };

  /**
   * Drops the lane's events not yet invoked (the current batch's from `current.next`, and every
   * waiting batch); with `seekBack`, moves the fetch position back to the first of them. Callers
   * seek back only while the partition is still this member's.
   */
  const drop = (lane: Lane<Port>, seekBack: boolean) => {
    const current = lane.current;
    const first = firstOffsetOf(current?.batch.events[current.next]) ?? firstOffsetOf(lane.queue[0]?.events[0]);
    lane.queue = [];
    lane.current = undefined;
    lane.generation += 1;
    wakeRoomWaiters(lane);
    if (seekBack && first !== undefined) options.seek(lane.partition, first);
  };

  const work = async (lane: Lane<Port>): Promise<void> => {
    for (;;) {
      if (lane.current === undefined || lane.current.next >= lane.current.batch.events.length) {
        const batch = lane.queue.shift();
        if (batch === undefined) {
          lane.current = undefined;
          return;
        }
        lane.current = { batch, next: 0 };
        wakeRoomWaiters(lane);
      }
      const current = lane.current;
      const { port, events } = current.batch;
      // Halted, stopping, revoked or stale: nothing more is invoked; a pending seek already says
      // where the partition goes on; a partition still ours goes on with the first event not
      // invoked; one no longer ours goes on at its next owner, from the committed offset.
      if (!admissible(lane.partition, current.batch)) {
        drop(lane, !port.isStale() && owned(lane.partition, current.batch));
        return;
      }
      const generation = lane.generation;
      const event = events[current.next] as HostEvent;
      await invoking.acquire();
      // `undefined`: not invoked (the slot came after a drain, a pause or a seek), or the step
      // threw: either way the event goes back to the partition's fetch position.
      let outcome: LaneStepOutcome | undefined;
      try {
        if (lane.generation === generation && admissible(lane.partition, current.batch)) outcome = await options.step(event, port);
      } catch (error) {
        options.onError(error, event, port);
      } finally {
        invoking.release();
      }
      // Drained meanwhile: what waited is dropped already, and the next generation starts from the commits.
      if (lane.generation !== generation) return;
      if (outcome !== undefined) current.next += 1;
      if (outcome === 'next') continue;
      drop(lane, outcome !== 'rewound' && !port.isStale() && owned(lane.partition, current.batch));
      return;
    }
  };

  const kick = (lane: Lane<Port>) => {
    if (lane.worker !== undefined) return;
    lane.worker = work(lane).finally(() => {
      lane.worker = undefined;
      // A batch taken in while the worker was finishing.
      if (lane.queue.length > 0) kick(lane);
    });
  };

  return {
    async enqueue(partition, port, events) {
      const lane = laneOf(partition);
      const last = lastOffsetOf(events);
      if (last === undefined || drained > 0) return;
      const generation = lane.generation;
      const batch: Queued<Port> = { port, events, memberGeneration: options.generation() };
      while (lane.queue.length >= WAITING_PER_LANE) {
        await new Promise<void>((resolve) => lane.roomWaiters.push(resolve));
        // Dropped while it waited (a pause, a redelivery, a rebalance): it is no longer what comes next.
        if (lane.generation !== generation || drained > 0) return;
      }
      if (!admissible(partition, batch)) return;
      port.resolveOffset(last);
      lane.queue.push(batch);
      kick(lane);
    },
    async whileDrained(work) {
      drained += 1;
      try {
        for (const lane of lanes.values()) {
          if (lane.current !== undefined) lane.current = { batch: lane.current.batch, next: lane.current.batch.events.length };
          lane.queue = [];
          lane.generation += 1;
          wakeRoomWaiters(lane);
        }
        await this.idle();
        return await work();
      } finally {
        drained -= 1;
      }
    },
    async idle() {
      for (;;) {
        const workers = [...lanes.values()].map((lane) => lane.worker).filter((worker) => worker !== undefined);
        if (workers.length === 0) return;
        await Promise.all(workers);
      }
    },
    depth() {
      const depths = new Map<number, number>();
      for (const lane of lanes.values()) {
        const current = lane.current === undefined ? 0 : lane.current.batch.events.length - lane.current.next;
        depths.set(lane.partition, current + lane.queue.reduce((sum, queued) => sum + queued.events.length, 0));
      }
      return depths;
    },
  };
}
