import { describe, expect, it } from 'vitest';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';

// The rules of docs/operations.md ("Health and metrics of the host") on a record driven by hand.

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };

function record() {
  const clock = { now: 1_000_000 };
  const progress = new PipelineProgress({
    pipeline: 'reviews',
    topic: 'reviews-topic',
    group: 'storage-consumer.reviews',
    now: () => clock.now,
  });
  const verdict = () => evaluateProgress(progress.snapshot(), bounds, clock.now);
  return { clock, progress, verdict };
}

describe('the progress record', () => {
  it('is STARTING until the consumer first joins, RUNNING once in its group, JOINING during a rebalance', () => {
    const { progress, verdict } = record();
    expect(verdict()).toMatchObject({ state: 'STARTING', ready: false, up: false });
    progress.consumerStarted();
    progress.joined([0, 1, 2]);
    progress.fetched();
    expect(verdict()).toMatchObject({ state: 'RUNNING', ready: true, up: true, causes: [] });
    progress.left();
    expect(verdict()).toMatchObject({ state: 'JOINING', ready: false, up: false });
  });

  it('is NOT_FETCHING past the first bound and FAILED past the second, naming the crashes; a fetch heals it', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    for (let crash = 0; crash < 3; crash += 1) {
      clock.now += 10_001;
      progress.crashed(new Error('This server does not host this topic-partition'));
      progress.joined([0]);
    }
    expect(verdict()).toMatchObject({ state: 'NOT_FETCHING', ready: false, up: false, failure: undefined });
    expect(verdict().causes).toEqual([
      'reviews: no fetch completed for 30 s, 3 consumer crashes since (last: Error: This server does not host this topic-partition)',
    ]);
    clock.now += 270_000;
    expect(verdict().state).toBe('FAILED');
    expect(verdict().failure).toMatch(/^no fetch completed for 300 s, 3 consumer crashes since .* \(STORAGE_FETCH_FAIL_AFTER_MS=300000\)$/);
    progress.fetched();
    expect(verdict()).toMatchObject({ state: 'RUNNING', ready: true });
    expect(progress.snapshot()).toMatchObject({ crashesSinceFetch: 0, crashesTotal: 3 });
  });

  it('does not count time spent on a batch, nor an idle member without partitions, as not fetching', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '10', lastOffset: '19' });
    clock.now += 40_000;
    expect(verdict().state).toBe('RUNNING');
    progress.stored(0, '20');
    clock.now += 20_000;
    expect(verdict().state).toBe('RUNNING');
    progress.joined([]);
    clock.now += 400_000;
    expect(verdict().state).toBe('RUNNING');
  });

  it('is STALLED when a batch of its own is in flight, or its partition has lag, without a stored batch for the bound', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0, 1]);
    progress.fetched();
    progress.attemptStarted({ partition: 1, firstOffset: '100', lastOffset: '149', highWatermark: '400' });
    progress.notStored(1, new Error('canceling statement due to lock timeout'));
    progress.attemptStarted({ partition: 1, firstOffset: '100', lastOffset: '149', highWatermark: '400' });
    clock.now += 60_001;
    const stalled = verdict();
    expect(stalled).toMatchObject({ state: 'STALLED', ready: false, up: false });
    expect(stalled.oldestInFlight).toMatchObject({ partition: 1, firstOffset: '100', lastOffset: '149', attempt: 2 });
    expect(stalled.causes[0]).toContain('reviews: stalled: partition 1: lag 300 and no stored batch for 60 s');
    expect(stalled.causes[0]).toContain(
      'in flight: reviews-topic partition 1 offsets 100..149, attempt 2, 60 s old, last error: Error: canceling statement due to lock timeout',
    );
    progress.stored(1, '150');
    expect(verdict().state).toBe('RUNNING');

    // Lag on a partition another member owns is not this host's stall.
    progress.lagRead([
      { partition: 1, lag: 0 },
      { partition: 2, lag: 500 },
    ]);
    clock.now += 120_000;
    progress.fetched();
    expect(verdict().state).toBe('RUNNING');
    // Lag on its own partition with nothing stored is.
    progress.lagRead([{ partition: 0, lag: 5 }]);
    clock.now += 60_001;
    progress.fetched();
    expect(verdict()).toMatchObject({ state: 'STALLED' });
    progress.lagRead([{ partition: 0, lag: 0 }]);
    expect(verdict().state).toBe('RUNNING');
  });

  it("lets no lag reading taken before a partition's last stored batch bring its old lag back (no false stall after a recovery)", () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([1]);
    progress.fetched();
    progress.attemptStarted({ partition: 1, firstOffset: '0', lastOffset: '4', highWatermark: '5' });
    // A background reading asks the broker now: the group's committed offset is still 0, so lag 5 ...
    const readingStartedAt = clock.now;
    clock.now += 500;
    // ... the batch is stored and committed while the answer travels ...
    progress.stored(1, '5');
    expect(verdict().state).toBe('RUNNING');
    // ... and the answer arrives: older than the store, it says nothing about partition 1 now.
    clock.now += 100;
    progress.lagRead([{ partition: 1, lag: 5 }], readingStartedAt);
    clock.now += bounds.stallAfterMs + 1;
    progress.fetched();
    expect(verdict()).toMatchObject({ state: 'RUNNING', up: true });
    // A reading taken after the store still counts.
    progress.lagRead([{ partition: 1, lag: 3 }], clock.now);
    clock.now += bounds.stallAfterMs + 1;
    progress.fetched();
    expect(verdict()).toMatchObject({ state: 'STALLED' });
  });

  it('ends FAILED or STOPPED for good, and leaves room for PAUSED', () => {
    const { progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.setPaused(true);
    expect(verdict()).toMatchObject({ state: 'PAUSED', up: false });
    progress.setPaused(false);
    progress.failed(new Error('relation "reviews" does not exist'));
    expect(verdict()).toMatchObject({
      state: 'FAILED',
      ready: false,
      causes: ['reviews: failed: Error: relation "reviews" does not exist'],
    });
    expect(progress.snapshot().lastError?.stack).toContain('relation');
    progress.stopped();
    expect(verdict().state).toBe('FAILED');
  });
});
