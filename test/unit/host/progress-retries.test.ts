import { describe, expect, it } from 'vitest';
import { describeBatch, evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import { buildPipelineStatus } from '../../../host/status-report.js';
import { ManualClock } from '../../helpers/clock.js';

// In-process database retries inside one attempt show in the stall line and the status (issue 29).

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };

describe('a batch retried inside its attempt', () => {
  it('carries the retry count and the last error into the stall cause, describeBatch and the status document', () => {
    const clock = new ManualClock();
    const progress = new PipelineProgress({ pipeline: 'app-stats', topic: 'app-stats', group: 'storage-consumer.app-stats', clock });
    progress.setPaused(false);
    progress.consumerStarted();
    progress.joined([0]);
    progress.fetched();
    progress.attemptStarted({ partition: 0, firstOffset: '0', lastOffset: '49', highWatermark: '50' });
    const timeout = Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
    clock.advance(31_000);
    progress.retried(0, timeout);
    clock.advance(31_000);
    progress.retried(0, timeout);
    clock.advance(1_000);
    progress.fetched();

    const snapshot = progress.snapshot();
    const verdict = evaluateProgress(snapshot, bounds, clock.monotonic());
    const batch = snapshot.inFlight[0];
    expect(batch?.retries).toBe(2);
    expect(verdict.state).toBe('STALLED');
    expect(verdict.causes[0]).toContain(
      'in flight: app-stats partition 0 offsets 0..49, attempt 1 (2 database retries), 63 s old, last error: Error: canceling statement due to statement timeout',
    );
    expect(describeBatch(batch!, clock.monotonic())).toContain('attempt 1 (2 database retries)');

    const document = buildPipelineStatus({
      progress: snapshot,
      pipeline: 'app-stats',
      topic: 'app-stats',
      groupId: 'storage-consumer.app-stats',
      state: verdict.state,
      hostId: 'host-1:1',
      memberId: undefined,
      pause: undefined,
      pauseRead: { readAt: undefined, error: undefined },
      group: { error: 'not read' },
    });
    expect(document.partitions.find((partition) => partition.partition === 0)?.in_flight).toMatchObject({
      attempt: 1,
      retries: 2,
      last_error: { message: 'Error: canceling statement due to statement timeout' },
    });
    expect(document.last_error?.message).toBe('Error: canceling statement due to statement timeout');
  });

  it('starts a redelivered attempt with no retries counted', () => {
    const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews', group: 'g' });
    progress.attemptStarted({ partition: 1, firstOffset: '10', lastOffset: '19' });
    progress.retried(1, new Error('Connection terminated unexpectedly'));
    progress.notStored(1, new Error('database still failing after 2 attempts'));
    const again = progress.attemptStarted({ partition: 1, firstOffset: '10', lastOffset: '19' });
    expect(again).toMatchObject({ attempt: 2, retries: 0, lastError: { message: 'Error: database still failing after 2 attempts' } });
  });
});
