/**
 * The topic incarnation watch (host/topic-incarnation.ts) on fake timers, with the topic's id,
 * the group's start offsets, the drain and the seeks as plain functions: a batch is taken in only
 * after a read that started after it; a re-created topic is logged once and each assigned
 * partition is moved to the new incarnation's start before any batch is taken in again; a paused
 * consumer (no batches) notices it on the periodic read; a topic that is gone admits nothing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CoreLogger } from '../../../shared/logger.js';
import { watchTopicIncarnation } from '../../../host/topic-incarnation.js';

const INTERVAL_MS = 5_000;

/** Lets real turns of the event loop pass (a read starts on one), with the fake timers' due callbacks run between them. */
async function settle(): Promise<void> {
  for (let turn = 0; turn < 5; turn += 1) {
    await new Promise((resolve) => setImmediate(resolve));
    await vi.advanceTimersByTimeAsync(0);
  }
}

/** Moves the fake clock on by `ms`, letting reads start and end on the way. */
async function pass(ms: number): Promise<void> {
  await settle();
  await vi.advanceTimersByTimeAsync(ms);
  await settle();
}

function harness(firstId = 'A') {
  let id: string | undefined = firstId;
  let failure: Error | undefined;
  const events: string[] = [];
  const reads = vi.fn(() => {
    events.push(`read ${id ?? 'none'}`);
    if (failure) return Promise.reject(failure);
    return Promise.resolve([{ topic: 'reviews', id }]);
  });
  const warn = vi.fn();
  const info = vi.fn();
  const logger = { warn, info, error: vi.fn(), debug: vi.fn() } as unknown as CoreLogger;
  let releaseDrain: (() => void) | undefined;
  let holdDrain = false;
  const watch = watchTopicIncarnation({
    pipeline: 'reviews',
    topic: 'reviews',
    ids: { read: reads },
    startOffsets: () => {
      events.push('start offsets');
      return Promise.resolve(
        new Map([
          [0, '0'],
          [1, '12'],
          [2, '0'],
        ]),
      );
    },
    drained: async (work) => {
      events.push('drain');
      if (holdDrain) await new Promise<void>((resolve) => (releaseDrain = resolve));
      await work();
      events.push('drained');
    },
    seek: (partition, offset) => events.push(`seek ${partition} ${offset}`),
    logger,
    intervalMs: INTERVAL_MS,
  });
  return {
    watch,
    reads,
    warn,
    info,
    events,
    setId: (next: string | undefined) => (id = next),
    fail: (error: Error | undefined) => (failure = error),
    holdDrain: () => (holdDrain = true),
    releaseDrain: () => releaseDrain?.(),
  };
}

const CHANGE_LINE =
  'topic reviews was deleted and re-created (id A -> B): positions of the old incarnation forgotten; ' +
  'reading the new one from its committed offsets or its start';

describe('the topic incarnation watch', () => {
  // setImmediate stays real: a read starts on the next turn of the event loop.
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => vi.useRealTimers());

  it('takes a batch in only after a read that started after it, one read for the batches that wait together', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    expect(h.watch.current()).toBe('A');

    // Act
    const admitted = await Promise.all([h.watch.admit(), h.watch.admit(), h.watch.admit()]);

    // Assess
    expect(admitted).toEqual([true, true, true]);
    expect(h.reads).toHaveBeenCalledTimes(2); // the baseline, then one read for the three batches
    expect(h.warn).not.toHaveBeenCalled();
    h.watch.stop();
  });

  it('does not count a read under way when a batch arrives: the batch waits for the next one', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.watch.assigned([1]);
    await h.watch.admit();
    let answer: (() => void) | undefined;
    h.reads.mockImplementationOnce(() => new Promise((resolve) => (answer = () => resolve([{ topic: 'reviews', id: 'A' }]))));
    const first = h.watch.admit();
    await settle(); // the read is on its way
    h.setId('B'); // the topic is re-created meanwhile
    answer?.();

    // Act
    const second = h.watch.admit(); // arrived after the first read started: it needs a read of its own

    // Assess
    expect(await first).toBe(true);
    expect(await second).toBe(false);
    expect(h.events).toContain('seek 1 12');
    h.watch.stop();
  });

  it('on a re-created topic logs once, then moves each assigned partition to the new start with nothing written or waiting', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.watch.assigned([0, 1]);
    await settle();
    h.events.length = 0;
    h.setId('B');

    // Act
    const admitted = await h.watch.admit();

    // Assess
    expect(admitted).toBe(false);
    expect(h.events).toEqual(['read B', 'drain', 'start offsets', 'seek 0 0', 'seek 1 12', 'drained']);
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn).toHaveBeenCalledWith(CHANGE_LINE, {
      pipeline: 'reviews',
      topic: 'reviews',
      previousTopicId: 'A',
      topicId: 'B',
      partitions: [0, 1],
    });
    expect(h.watch.current()).toBe('B');
    // The next batch (fetched from the sought offsets) is the new incarnation's.
    expect(await h.watch.admit()).toBe(true);
    expect(h.warn).toHaveBeenCalledTimes(1);
    h.watch.stop();
  });

  it('admits no batch that arrives while the change is being handled', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.watch.assigned([2]);
    await settle();
    h.holdDrain();
    h.setId('B');
    const noticing = h.watch.admit();
    await settle();

    // Act
    const during = h.watch.admit();
    h.releaseDrain();

    // Assess
    expect(await noticing).toBe(false);
    expect(await during).toBe(false);
    expect(h.events.filter((event) => event.startsWith('seek'))).toEqual(['seek 2 0']);
    h.watch.stop();
  });

  it('notices the change on its periodic read while no batch comes (a paused consumer)', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.watch.assigned([0, 1, 2]);
    await settle();
    h.setId('B');

    // Act / Assess
    await pass(INTERVAL_MS - 100);
    expect(h.events).not.toContain('drain');
    await pass(100);
    expect(h.events.slice(-6)).toEqual(['drain', 'start offsets', 'seek 0 0', 'seek 1 12', 'seek 2 0', 'drained']);
    expect(h.warn).toHaveBeenCalledWith(CHANGE_LINE, expect.objectContaining({ topicId: 'B' }));
    h.watch.stop();
  });

  it('admits nothing while the topic is gone, says so once, and handles its return under a new id', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.watch.assigned([0]);
    await settle();
    h.setId(undefined);

    // Act / Assess
    expect(await h.watch.admit()).toBe(false);
    expect(await h.watch.admit()).toBe(false);
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn.mock.calls[0]?.[0]).toBe('topic reviews no longer exists (id A): nothing is fetched from it until it is re-created');
    h.setId('B');
    await pass(INTERVAL_MS);
    expect(h.warn).toHaveBeenLastCalledWith(CHANGE_LINE, expect.objectContaining({ previousTopicId: 'A', topicId: 'B' }));
    expect(h.events).toContain('seek 0 0');
    expect(await h.watch.admit()).toBe(true);
    h.watch.stop();
  });

  it('lets batches wait while the id cannot be read, warning once, and takes them in once it can', async () => {
    // Prepare
    const h = harness();
    await h.watch.start();
    h.fail(new Error('connection refused'));

    // Act
    let admitted: boolean | undefined;
    void h.watch.admit().then((value) => (admitted = value));
    await pass(3_500);

    // Assess
    expect(admitted).toBeUndefined();
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn.mock.calls[0]?.[0]).toBe('cannot read the identity of topic reviews; fetched batches wait for it');
    h.fail(undefined);
    await pass(1_000);
    expect(admitted).toBe(true);
    expect(h.info).toHaveBeenCalledWith('the identity of topic reviews is readable again', { pipeline: 'reviews', topic: 'reviews' });
    h.watch.stop();
  });

  it('admits every batch, having said why once, when the cluster cannot give topic ids', async () => {
    // Prepare
    const h = harness();
    h.fail(Object.assign(new Error('the broker speaks Metadata up to v9'), { lasting: true }));

    // Act
    await h.watch.start();

    // Assess
    expect(await h.watch.admit()).toBe(true);
    await pass(INTERVAL_MS * 3);
    expect(h.reads).toHaveBeenCalledTimes(1);
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn.mock.calls[0]?.[0]).toBe(
      'topic ids cannot be read from this cluster: a deletion and re-creation of topic reviews is not noticed',
    );
    h.watch.stop();
  });

  it('takes nothing in once stopped', async () => {
    const h = harness();
    await h.watch.start();
    h.watch.stop();
    expect(await h.watch.admit()).toBe(false);
  });
});
