import { describe, expect, it } from 'vitest';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import { ManualClock } from '../../helpers/clock.js';

// The rules of docs/operations.md ("Health and metrics of the host") on a record driven by hand.

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };

/** A record on a hand-driven clock whose pause state was read (not paused), unless `pauseRead` is false. */
function record(pauseRead = true) {
  const manual = new ManualClock();
  // `clock.now += ms` lets time pass on both clocks, as in the tests below.
  const clock = {
    get now() {
      return manual.monotonic();
    },
    set now(value: number) {
      manual.advance(value - manual.monotonic());
    },
  };
  const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews-topic', group: 'storage-consumer.reviews', clock: manual });
  if (pauseRead) progress.setPaused(false);
  const verdict = () => evaluateProgress(progress.snapshot(), bounds, manual.monotonic());
  return { clock, manual, progress, verdict };
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
    progress.stored(0);
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
    progress.stored(1);
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
    progress.committed(1, '5');
    progress.stored(1);
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

  it('restarts the fetch clock at the resume: a pause longer than the fail bound fails nothing, not even for a moment', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '0', lastOffset: '9', highWatermark: '500' });
    progress.stored(0);
    progress.setPaused(true);
    clock.now += 6 * 3_600_000;
    expect(verdict()).toMatchObject({ state: 'PAUSED', ready: true, failure: undefined });
    progress.setPaused(false);
    // The lag left from before the pause is not a stall either: nothing could store it meanwhile.
    expect(verdict()).toMatchObject({ state: 'RUNNING', ready: true, notFetchingMs: 0 });
    clock.now += bounds.fetchUnreadyAfterMs;
    expect(verdict().state).toBe('RUNNING');
    // ... but a resumed pipeline that then fetches nothing is held to the bounds from the resume.
    clock.now += 1;
    expect(verdict().state).toBe('NOT_FETCHING');
    clock.now += bounds.fetchFailAfterMs - bounds.fetchUnreadyAfterMs;
    expect(verdict().state).toBe('FAILED');
  });

  it('gives an idle standby no fetch clock, through a rebalance, and the full bound once it is given partitions', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([]);
    clock.now += 5 * 3_600_000;
    expect(verdict()).toMatchObject({ state: 'RUNNING', failure: undefined });
    progress.left();
    clock.now += 20_000;
    expect(verdict()).toMatchObject({ state: 'JOINING', notFetchingMs: 0, failure: undefined });
    progress.joined([0, 1]);
    expect(verdict()).toMatchObject({ state: 'RUNNING', notFetchingMs: 0 });
    clock.now += bounds.fetchFailAfterMs + 1;
    expect(verdict().failure).toMatch(/^no fetch completed for 300 s \(none since the start\)/);
  });

  it('lets no rebalance excuse a consumer that crashed since its last progress (a crash loop that rejoins still fails)', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    for (let round = 0; round < 31; round += 1) {
      clock.now += 5_000;
      progress.crashed(new Error('This server does not host this topic-partition'));
      progress.joined([0]);
      clock.now += 5_000;
      progress.left();
      progress.joined([0]);
    }
    expect(verdict().state).toBe('FAILED');
  });

  // Short bounds, as a host started with STORAGE_FETCH_FAIL_AFTER_MS=5000 and
  // STORAGE_MAX_POLL_INTERVAL_MS=60000 has them (the join's bound: 60 s + 10 s + kafkajs' 5 s).
  const short = { fetchUnreadyAfterMs: 2_000, fetchFailAfterMs: 5_000, stallAfterMs: 60_000, rebalanceTimeoutMs: 75_000 };

  it('holds a first join past the fail bound as JOINING, not FAILED, and fails it past the rebalance timeout with a line that says so', () => {
    const { clock, progress } = record();
    const verdict = () => evaluateProgress(progress.snapshot(), short, clock.now);
    progress.consumerStarted();
    clock.now += 1_000;
    expect(verdict()).toMatchObject({ state: 'STARTING', ready: false, failure: undefined });
    // The coordinator holds the JoinGroup until the other members rejoined (a batch on a lock).
    progress.joining();
    clock.now += 15_000;
    expect(verdict()).toMatchObject({ state: 'JOINING', ready: false, up: false, notFetchingMs: 0, failure: undefined });
    expect(verdict().causes).toEqual([
      'reviews: joining its consumer group storage-consumer.reviews for 15 s (the first join; no fetch is expected until the assignment)',
    ]);
    clock.now += short.rebalanceTimeoutMs - 15_000;
    expect(verdict()).toMatchObject({ state: 'JOINING', failure: undefined });
    clock.now += 1;
    expect(verdict()).toMatchObject({ state: 'FAILED', ready: false });
    expect(verdict().failure).toBe(
      "joining consumer group storage-consumer.reviews for 76 s, longer than the rebalance timeout allows (STORAGE_MAX_POLL_INTERVAL_MS + 10 s, and kafkajs' 5 s = 75 s)",
    );
  });

  it('gives a member the full fail bound from its assignment after a long join, and none to a consumer that never begins to join', () => {
    const joined = record();
    const verdict = () => evaluateProgress(joined.progress.snapshot(), short, joined.clock.now);
    joined.progress.consumerStarted();
    joined.progress.joining();
    joined.clock.now += 40_000;
    joined.progress.joined([0, 1]);
    expect(verdict()).toMatchObject({ state: 'RUNNING', notFetchingMs: 0 });
    joined.clock.now += short.fetchFailAfterMs;
    expect(verdict()).toMatchObject({ state: 'NOT_FETCHING', failure: undefined });
    joined.clock.now += 1;
    expect(verdict().failure).toBe('no fetch completed for 5 s (none since the start) (STORAGE_FETCH_FAIL_AFTER_MS=5000)');

    // Connecting to a broker that does not answer: the fetch clock runs from the start, as ever.
    const unreachable = record();
    unreachable.progress.consumerStarted();
    unreachable.clock.now += short.fetchFailAfterMs + 1;
    expect(evaluateProgress(unreachable.progress.snapshot(), short, unreachable.clock.now).failure).toBe(
      'no fetch completed for 5 s (none since the start) (STORAGE_FETCH_FAIL_AFTER_MS=5000)',
    );
  });

  it('measures a rebalance from the moment the member left its assignment, and says why it is out of its group', () => {
    const { clock, progress } = record();
    const verdict = () => evaluateProgress(progress.snapshot(), short, clock.now);
    progress.consumerStarted();
    progress.joining();
    progress.joined([0]);
    progress.fetched();
    progress.left();
    clock.now += 10_000;
    progress.joining();
    clock.now += 5_000;
    expect(verdict()).toMatchObject({ state: 'JOINING', notFetchingMs: 0 });
    expect(verdict().causes).toEqual(['reviews: not in its consumer group storage-consumer.reviews for 15 s (rebalancing)']);
    clock.now += short.rebalanceTimeoutMs - 15_000 + 1;
    expect(verdict().failure).toMatch(
      /^joining consumer group storage-consumer\.reviews for 76 s, longer than the rebalance timeout allows/,
    );
  });

  it('says a member the broker dropped is out of its group until it rejoined', () => {
    const { clock, progress } = record();
    const verdict = () => evaluateProgress(progress.snapshot(), short, clock.now);
    progress.consumerStarted();
    progress.joining();
    progress.joined([0, 1, 2]);
    progress.fetched();
    progress.memberDropped();
    clock.now += 3_000;
    const dropped = verdict();
    expect(dropped).toMatchObject({ state: 'JOINING', ready: false, up: false, notFetchingMs: 0 });
    expect(dropped.causes).toEqual([
      'reviews: not in its consumer group storage-consumer.reviews for 3 s (the broker dropped this member; rejoining)',
    ]);
    expect(progress.snapshot()).toMatchObject({ inGroup: false, assignment: undefined, joinCause: 'dropped' });
    // The rejoin keeps the cause until it is over.
    progress.joining();
    clock.now += 1_000;
    expect(verdict().causes[0]).toContain('(the broker dropped this member; rejoining)');
    progress.joined([0, 1, 2]);
    expect(verdict()).toMatchObject({ state: 'RUNNING', ready: true, causes: [] });
  });

  it('lets no join excuse a consumer that crashed since its last progress: a crash loop that rejoins every time fails at the fail bound', () => {
    const { clock, progress } = record();
    const verdict = () => evaluateProgress(progress.snapshot(), short, clock.now);
    progress.consumerStarted();
    progress.joining();
    progress.joined([0]);
    progress.fetched();
    const fetchedAt = clock.now;
    for (let round = 0; round < 3; round += 1) {
      clock.now += 1_000;
      progress.crashed(new Error('This server does not host this topic-partition'));
      progress.joining();
      clock.now += 500;
      progress.joined([0]);
    }
    // A join still under way after the last crash is no excuse either.
    progress.crashed(new Error('This server does not host this topic-partition'));
    progress.joining();
    clock.now = fetchedAt + short.fetchFailAfterMs;
    expect(verdict()).toMatchObject({ state: 'NOT_FETCHING', failure: undefined });
    clock.now += 1;
    expect(verdict().failure).toMatch(/^no fetch completed for 5 s, 4 consumer crashes since \(last: Error: This server does not host/);
  });

  it('lets a batch excuse a missing fetch only while the loop holds it: one waiting for its redelivery fails the pipeline', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '100', lastOffset: '149' });
    progress.notStored(0, new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    // The back-off: still the loop's.
    clock.now += 50_000;
    expect(verdict().notFetchingMs).toBe(0);
    progress.awaitingRedelivery(0);
    for (let crash = 0; crash < 30; crash += 1) {
      clock.now += 10_000;
      progress.crashed(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:19092'));
    }
    clock.now += 1;
    const failed = verdict();
    expect(failed.state).toBe('FAILED');
    expect(failed.failure).toContain('a batch waits for its redelivery (partition 0 offsets 100..149)');
  });

  it('lets go of a batch after a consumer crash without restarting the fetch clock: only a fetch or a stored batch is progress then', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0, 1]);
    progress.fetched();
    const fetchedAt = clock.now;
    progress.attemptStarted({ partition: 0, firstOffset: '100', lastOffset: '149' });
    progress.attemptStarted({ partition: 1, firstOffset: '7', lastOffset: '9' });
    clock.now += 5_000;
    progress.notStored(0, new Error('canceling statement due to statement timeout'));
    progress.crashed(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:19092'));
    // The back-off ends, and a rebalance takes the other batch: neither fetched anything.
    clock.now += 5_000;
    progress.awaitingRedelivery(0);
    progress.dropped(1);
    expect(verdict().notFetchingMs).toBe(clock.now - fetchedAt);
    clock.now = fetchedAt + bounds.fetchFailAfterMs + 1;
    expect(verdict().failure).toContain('a batch waits for its redelivery (partition 0 offsets 100..149)');
    // Without the crash, letting go of the batch starts the clock again.
    const healthy = record();
    healthy.progress.consumerStarted();
    healthy.progress.joined([0]);
    healthy.progress.fetched();
    healthy.progress.attemptStarted({ partition: 0, firstOffset: '100', lastOffset: '149' });
    healthy.clock.now += 50_000;
    healthy.progress.notStored(0, new Error('canceling statement due to statement timeout'));
    healthy.progress.awaitingRedelivery(0);
    expect(healthy.verdict()).toMatchObject({ state: 'RUNNING', notFetchingMs: 0 });
  });

  it('starts the stall clock of a partition handed over in a rebalance when it becomes ours', () => {
    const { clock, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    // Another member owns partition 1 and lags there for ten minutes.
    progress.lagRead([
      { partition: 0, lag: 0 },
      { partition: 1, lag: 800 },
    ]);
    clock.now += 600_000;
    progress.fetched();
    progress.left();
    progress.joined([0, 1]);
    progress.fetched();
    expect(verdict().state).toBe('RUNNING');
    clock.now += bounds.stallAfterMs + 1;
    progress.fetched();
    expect(verdict().state).toBe('STALLED');
  });

  it('records an offset as committed only when the commit succeeded', () => {
    const { progress } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.attemptStarted({ partition: 0, firstOffset: '0', lastOffset: '9', highWatermark: '50' });
    progress.committed(0, '10');
    progress.stored(0);
    progress.attemptStarted({ partition: 0, firstOffset: '10', lastOffset: '19', highWatermark: '50' });
    // The commit of 20 failed: only stored() is told.
    progress.stored(0);
    expect(progress.snapshot().partitions).toMatchObject([{ partition: 0, committed: '10', lag: 40 }]);
  });

  it('holds a pipeline whose pause state was never read: STARTING with the reason, then the fetch bounds', () => {
    const { clock, progress, verdict } = record(false);
    progress.consumerStarted();
    progress.joined([0]);
    progress.pauseUnread('cannot read pipeline_pauses: 57014');
    expect(verdict()).toMatchObject({ state: 'STARTING', ready: false });
    expect(verdict().causes).toEqual([
      'reviews: pause state not read yet (cannot read pipeline_pauses: 57014); nothing is fetched until it is',
    ]);
    // Standing by excuses nothing while the pause state is unknown.
    progress.joined([]);
    clock.now += bounds.fetchUnreadyAfterMs + 1;
    expect(verdict()).toMatchObject({ state: 'NOT_FETCHING' });
    clock.now += bounds.fetchFailAfterMs - bounds.fetchUnreadyAfterMs;
    expect(verdict().failure).toMatch(/^pause state not read yet \(cannot read pipeline_pauses: 57014\), nothing fetched for 300 s/);
  });

  it('changes no verdict on a wall-clock step in either direction, and shows wall times for people', () => {
    const { manual, progress, verdict } = record();
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '0', lastOffset: '9' });
    const started = progress.snapshot().inFlight[0]?.startedWallAt;
    manual.stepWall(+86_400_000);
    expect(verdict()).toMatchObject({ state: 'RUNNING', notFetchingMs: 0 });
    progress.stored(0);
    manual.advance(1_000);
    progress.fetched();
    manual.stepWall(-2 * 86_400_000);
    expect(verdict()).toMatchObject({ state: 'RUNNING', notFetchingMs: 0 });
    expect(started).toBe(Date.parse('2026-12-01T12:00:00Z'));
    expect(progress.snapshot().partitions[0]?.lastStoredWallAt).toBe(Date.parse('2026-12-02T12:00:00Z'));
  });
});
