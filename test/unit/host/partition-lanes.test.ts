import { describe, expect, it } from 'vitest';
import type { HostEvent } from '../../../host/event-cut.js';
import type { LaneBatchPort, LaneStepOutcome } from '../../../host/partition-lanes.js';
import { createPartitionLanes } from '../../../host/partition-lanes.js';

// The lanes driven with plain events and ports: a step the test finishes when it wants, so each
// case can hold a write in flight while the next batches arrive.

/** An event of `offsets` (one partition). */
function event(partition: number, offsets: readonly number[]): HostEvent {
  return {
    event: { eventSource: 'SelfManagedKafka', bootstrapServers: '', records: {} },
    partitions: [{ key: `t-${partition}`, offsets: offsets.map(String) }],
    records: offsets.length,
    bytes: 0,
    oversized: false,
  } as unknown as HostEvent;
}

interface TestPort extends LaneBatchPort {
  readonly resolved: string[];
  stale: boolean;
}

function port(): TestPort {
  const value: TestPort = {
    resolved: [],
    stale: false,
    isRunning: () => true,
    isStale: () => value.stale,
    resolveOffset: (offset) => value.resolved.push(offset),
  };
  return value;
}

/** A step the test ends: `finish(outcome)` ends the oldest running one. */
function harness(concurrency = 3) {
  const started: string[] = [];
  const running: Array<{ label: string; end: (outcome: LaneStepOutcome) => void }> = [];
  const seeks: string[] = [];
  const errors: unknown[] = [];
  let halted = false;
  let throwNext = false;
  /** The membership as the lanes see it: a generation, and the partitions owned in it (all, unless revoked). */
  const member = { generation: 1, revoked: new Set<number>() };
  const lanes = createPartitionLanes<TestPort>({
    concurrency,
    halted: () => halted,
    owns: (partition, generation) => generation === member.generation && !member.revoked.has(partition),
    generation: () => member.generation,
    step: (hostEvent) => {
      const label = `${hostEvent.partitions[0]?.key}:${hostEvent.partitions[0]?.offsets.join(',')}`;
      started.push(label);
      if (throwNext) {
        throwNext = false;
        return Promise.reject(new Error('a bug'));
      }
      return new Promise<LaneStepOutcome>((resolve) => running.push({ label, end: resolve }));
    },
    seek: (partition, offset) => seeks.push(`${partition}@${offset}`),
    onError: (error) => errors.push(error),
  });
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  const finish = async (label: string, outcome: LaneStepOutcome = 'next') => {
    const index = running.findIndex((step) => step.label === label);
    if (index < 0) throw new Error(`${label} is not running (running: ${running.map((step) => step.label).join(' ')})`);
    const [step] = running.splice(index, 1);
    step?.end(outcome);
    await settle();
  };
  return {
    lanes,
    started,
    running: () => running.map((step) => step.label),
    seeks,
    errors,
    finish,
    settle,
    halt: (value: boolean) => (halted = value),
    revoke: (partition: number) => member.revoked.add(partition),
    assign: () => {
      member.generation += 1;
      member.revoked.clear();
    },
    throwOnNextStep: () => (throwNext = true),
  };
}

/** Whether `promise` settled by now. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setTimeout(resolve, 0));
  return done;
}

describe('partition lanes', () => {
  it('takes the next batch while one is written, resolves its offsets at once, and holds a third until there is room', async () => {
    // Prepare
    const h = harness();
    const first = port();
    const second = port();
    const third = port();

    // Act: three batches of partition 0 arrive while the first one's event is written
    await h.lanes.enqueue(0, first, [event(0, [0, 1])]);
    const secondTaken = h.lanes.enqueue(0, second, [event(0, [2, 3])]);
    const thirdTaken = h.lanes.enqueue(0, third, [event(0, [4, 5])]);

    // Assess: the second is taken at once (the fetch goes on), the third waits for room
    expect(await settled(secondTaken)).toBe(true);
    expect(await settled(thirdTaken)).toBe(false);
    expect(h.running()).toEqual(['t-0:0,1']);
    expect([first.resolved, second.resolved, third.resolved]).toEqual([['1'], ['3'], []]);
    expect(h.lanes.depth().get(0)).toBe(2);

    await h.finish('t-0:0,1');
    expect(await settled(thirdTaken)).toBe(true);
    expect(third.resolved).toEqual(['5']);
    expect(h.running()).toEqual(['t-0:2,3']);
    await h.finish('t-0:2,3');
    await h.finish('t-0:4,5');
    await h.lanes.idle();
    expect(h.started).toEqual(['t-0:0,1', 't-0:2,3', 't-0:4,5']);
    expect(h.seeks).toEqual([]);
  });

  it('writes the partitions side by side, each in offset order, within the concurrency', async () => {
    // Prepare: two slots, three partitions
    const h = harness(2);

    // Act
    for (const partition of [0, 1, 2]) await h.lanes.enqueue(partition, port(), [event(partition, [10]), event(partition, [11])]);
    await h.settle();

    // Assess: two partitions in flight, the third waits for a slot; each partition one event at a time
    expect(h.running()).toEqual(['t-0:10', 't-1:10']);
    await h.finish('t-0:10');
    expect(h.running()).toEqual(['t-1:10', 't-2:10']);
    await h.finish('t-1:10');
    expect(h.running()).toEqual(['t-2:10', 't-0:11']);
    await h.finish('t-2:10');
    await h.finish('t-0:11');
    await h.finish('t-1:11');
    await h.finish('t-2:11');
    await h.lanes.idle();
    for (const partition of [0, 1, 2]) {
      const order = h.started.filter((label) => label.startsWith(`t-${partition}:`));
      expect(order).toEqual([`t-${partition}:10`, `t-${partition}:11`]);
    }
  });

  it('after a redelivery (rewound) drops what waits without a seek of its own, and the held batch is not taken', async () => {
    // Prepare
    const h = harness();
    const held = port();
    await h.lanes.enqueue(0, port(), [event(0, [0]), event(0, [1])]);
    await h.lanes.enqueue(0, port(), [event(0, [2])]);
    const heldTaken = h.lanes.enqueue(0, held, [event(0, [3])]);

    // Act: the first event is not stored; the step sought back to offset 0 itself
    await h.finish('t-0:0', 'rewound');

    // Assess
    expect(await settled(heldTaken)).toBe(true);
    expect(held.resolved).toEqual([]);
    await h.lanes.idle();
    expect(h.started).toEqual(['t-0:0']);
    expect(h.seeks).toEqual([]);
    expect(h.lanes.depth().get(0)).toBe(0);
  });

  it('after a stored event it may not go on with (leave), moves the fetch position back to the first event not invoked', async () => {
    // Prepare
    const h = harness();
    await h.lanes.enqueue(0, port(), [event(0, [0, 1]), event(0, [2, 3])]);
    await h.lanes.enqueue(0, port(), [event(0, [4])]);

    // Act: the first event was stored, then the group heartbeat failed
    await h.finish('t-0:0,1', 'leave');
    await h.lanes.idle();

    // Assess
    expect(h.started).toEqual(['t-0:0,1']);
    expect(h.seeks).toEqual(['0@2']);
  });

  it('a pause during a write: the event finishes, nothing more is invoked, the fetch position goes back to the next event; nothing is taken while paused', async () => {
    // Prepare
    const h = harness();
    await h.lanes.enqueue(0, port(), [event(0, [7])]);
    await h.lanes.enqueue(0, port(), [event(0, [8, 9])]);

    // Act
    h.halt(true);
    await h.finish('t-0:7');
    await h.lanes.idle();
    const whilePaused = port();
    await h.lanes.enqueue(0, whilePaused, [event(0, [8, 9])]);

    // Assess
    expect(h.started).toEqual(['t-0:7']);
    expect(h.seeks).toEqual(['0@8']);
    expect(whilePaused.resolved).toEqual([]);

    // Act: the resume; the fetch from offset 8 brings the batch again
    h.halt(false);
    await h.lanes.enqueue(0, port(), [event(0, [8, 9])]);
    await h.settle();
    expect(h.running()).toEqual(['t-0:8,9']);
    await h.finish('t-0:8,9');
    await h.lanes.idle();
  });

  it('a revoked partition: what waits is dropped without a seek (its next owner starts from the committed offset)', async () => {
    // Prepare: one event in flight, a batch waiting
    const h = harness();
    await h.lanes.enqueue(0, port(), [event(0, [7])]);
    await h.lanes.enqueue(0, port(), [event(0, [8, 9])]);

    // Act: the partition is revoked while the first event is written
    h.revoke(0);
    await h.finish('t-0:7');
    await h.lanes.idle();
    const afterRevoke = port();
    await h.lanes.enqueue(0, afterRevoke, [event(0, [8, 9])]);

    // Assess: nothing more invoked, nothing sought, nothing taken in
    expect(h.started).toEqual(['t-0:7']);
    expect(h.seeks).toEqual([]);
    expect(afterRevoke.resolved).toEqual([]);
  });

  it('a batch taken in under an older generation is not written in the next one', async () => {
    // Prepare: a batch waits behind the one in flight
    const h = harness();
    await h.lanes.enqueue(0, port(), [event(0, [0])]);
    await h.lanes.enqueue(0, port(), [event(0, [1])]);

    // Act: a new assignment (a generation) while the first is written
    h.assign();
    await h.finish('t-0:0');
    await h.lanes.idle();

    // Assess
    expect(h.started).toEqual(['t-0:0']);
    expect(h.seeks).toEqual([]);
  });

  it('a seek pending for the partition: the batch is not taken, and a waiting one is dropped without a second seek', async () => {
    // Prepare
    const h = harness();
    const first = port();
    await h.lanes.enqueue(0, first, [event(0, [0])]);
    await h.lanes.enqueue(0, first, [event(0, [1])]);

    // Act: a seek is pending (someone sought the partition) when the event ends
    first.stale = true;
    await h.finish('t-0:0');
    await h.lanes.idle();
    const stale = port();
    stale.stale = true;
    await h.lanes.enqueue(0, stale, [event(0, [5])]);

    // Assess
    expect(h.started).toEqual(['t-0:0']);
    expect(h.seeks).toEqual([]);
    expect(stale.resolved).toEqual([]);
  });

  it('a join or a leave waits for the events in flight, drops what waits without a seek, and takes nothing until it is over', async () => {
    // Prepare: partition 0 writing with a batch waiting, partition 1 writing
    const h = harness();
    await h.lanes.enqueue(0, port(), [event(0, [0])]);
    await h.lanes.enqueue(0, port(), [event(0, [1])]);
    await h.lanes.enqueue(1, port(), [event(1, [0])]);
    const order: string[] = [];
    let endJoin: () => void = () => undefined;

    // Act
    const joined = h.lanes.whileDrained(async () => {
      order.push('join');
      await new Promise<void>((resolve) => (endJoin = resolve));
      return 'joined';
    });
    await h.settle();
    expect(order).toEqual([]);
    await h.finish('t-0:0');
    expect(order).toEqual([]);
    await h.finish('t-1:0');
    expect(order).toEqual(['join']);
    const duringJoin = port();
    await h.lanes.enqueue(0, duringJoin, [event(0, [1])]);
    endJoin();

    // Assess
    expect(await joined).toBe('joined');
    expect(duringJoin.resolved).toEqual([]);
    expect(h.started).toEqual(['t-0:0', 't-1:0']);
    expect(h.seeks).toEqual([]);
    const afterJoin = port();
    await h.lanes.enqueue(0, afterJoin, [event(0, [1])]);
    expect(afterJoin.resolved).toEqual(['1']);
    await h.settle();
    await h.finish('t-0:1');
    await h.lanes.idle();
  });

  it('a step that throws is reported and its event is fetched again', async () => {
    // Prepare
    const h = harness();
    h.throwOnNextStep();

    // Act
    await h.lanes.enqueue(0, port(), [event(0, [3]), event(0, [4])]);
    await h.lanes.idle();

    // Assess
    expect(h.errors).toHaveLength(1);
    expect(h.seeks).toEqual(['0@3']);
    expect(h.started).toEqual(['t-0:3']);
  });
});
