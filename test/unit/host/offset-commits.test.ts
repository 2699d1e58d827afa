import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CommitPort, CommitRequest } from '../../../host/offset-commits.js';
import { COMMIT_RETRY_BASE_MS, MAX_COMMIT_FAILURES, createOffsetCommits } from '../../../host/offset-commits.js';
import type { CoreLogger } from '../../../shared/logger.js';

// The offset commits alone, on fake timers: a port that fails the commits it is told to fail.

const place = { topic: 'reviews', partition: 1, firstOffset: '10', lastOffset: '19' };

function commits(floors?: ReadonlyMap<number, bigint>) {
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  const record =
    (level: string) =>
    (message: string, ...extra: Array<Record<string, unknown>>) =>
      lines.push({ level, message, fields: Object.assign({}, ...extra) as Record<string, unknown> });
  const logger: CoreLogger = { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
  const committed: string[] = [];
  const failures: string[] = [];
  let commitFailures = 0;
  let refusedCount = 0;
  const offsetCommits = createOffsetCommits({
    pipeline: { name: 'reviews', topic: 'reviews' },
    logger,
    metrics: { commitFailed: () => (commitFailures += 1), commitRefused: () => (refusedCount += 1) },
    progress: { committed: (partition, offset) => committed.push(`${partition}@${offset}`) },
    fail: (message) => failures.push(message),
    floorOf: async (partition) => floors?.get(partition),
  });
  return { offsetCommits, lines, committed, failures, commitFailures: () => commitFailures, refused: () => refusedCount };
}

/** A port whose first `failing` commits are refused (the coordinator moved); `running` says whether its consumer runs. */
function port(failing: number, running = () => true) {
  const sent: string[] = [];
  let calls = 0;
  const value: CommitPort = {
    isRunning: running,
    commitOffsetsIfNecessary: async (request: CommitRequest) => {
      calls += 1;
      if (calls <= failing) throw new Error('This is not the correct coordinator for this group');
      for (const { partitions } of request.topics) for (const { partition, offset } of partitions) sent.push(`${partition}@${offset}`);
    },
  };
  return { port: value, sent, calls: () => calls };
}

describe('the offset commits of a pipeline', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('log the retry that committed by its number, and the retries that failed before it', async () => {
    // Prepare
    const { offsetCommits, lines } = commits();
    const refused = port(3);

    // Act: the commit and two retries are refused, the third retry (after 1 + 2 + 4 s) commits
    await offsetCommits.commit(refused.port, [{ topic: 'reviews', partition: 1, offset: '20' }], place);
    await vi.advanceTimersByTimeAsync(7 * COMMIT_RETRY_BASE_MS);

    // Assess
    expect(refused.sent).toEqual(['1@20']);
    const retries = lines.filter(({ message }) => message.startsWith('offset commit retr'));
    expect(retries.map(({ message, fields }) => `${message} #${String(fields.retry)}`)).toEqual([
      'offset commit retry failed; retrying later #1',
      'offset commit retry failed; retrying later #2',
      'offset commit retried: committed #3',
    ]);
    expect(retries[2]?.fields).toMatchObject({ topic: 'reviews', partition: 1, first_offset: '10', last_offset: '19', offset: '20' });
    expect(offsetCommits.state.retries).toBe(0);
  });

  it('count failed retries as commit failures but not toward the pipeline failure; a success ends the streak', async () => {
    // Prepare
    const { offsetCommits, failures, commitFailures } = commits();
    const refused = port(1 + 2 * MAX_COMMIT_FAILURES);

    // Act: one failed commit, then retries that keep failing past MAX_COMMIT_FAILURES of them
    await offsetCommits.commit(refused.port, [{ topic: 'reviews', partition: 1, offset: '20' }], place);
    while (commitFailures() < 1 + 2 * MAX_COMMIT_FAILURES) await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    const streak = { failuresInRow: offsetCommits.state.failuresInRow, failures: [...failures], retries: offsetCommits.state.retries };
    await vi.advanceTimersByTimeAsync(30_000);

    // Assess
    expect(streak).toEqual({ failuresInRow: 1, failures: [], retries: 2 * MAX_COMMIT_FAILURES });
    expect(failures).toEqual([]);
    expect(refused.sent).toEqual(['1@20']);
    expect(offsetCommits.state.failuresInRow).toBe(0);
    expect(offsetCommits.state.pending.size).toBe(0);
  });

  it('drop the retry of a consumer that stopped, without asking the client again', async () => {
    // Prepare
    const { offsetCommits, committed } = commits();
    let running = true;
    const refused = port(1_000, () => running);

    // Act
    await offsetCommits.commit(refused.port, [{ topic: 'reviews', partition: 1, offset: '20' }], place);
    running = false;
    await vi.advanceTimersByTimeAsync(60_000);

    // Assess
    expect(refused.calls()).toBe(1);
    expect(offsetCommits.state.pending.size).toBe(0);
    expect(committed).toEqual([]);
  });

  it('forget their retries and the offsets asked for on a join or a leave', async () => {
    // Prepare
    const { offsetCommits } = commits();
    const refused = port(1_000);
    await offsetCommits.commit(refused.port, [{ topic: 'reviews', partition: 1, offset: '20' }], place);
    const before = { pending: offsetCommits.state.pending.size, asked: offsetCommits.state.askedFor.get(1) };

    // Act
    offsetCommits.forget();
    await vi.advanceTimersByTimeAsync(60_000);

    // Assess
    expect(before).toEqual({ pending: 1, asked: 20n });
    expect(refused.calls()).toBe(1);
    expect(offsetCommits.state.pending.size).toBe(0);
    expect(offsetCommits.state.askedFor.size).toBe(0);
  });

  it('send no retry of the old generation once a join forgot them while an earlier retry was in flight', async () => {
    // Prepare: partitions 1 and 2 wait for their retry; the retry of 1 hangs until the join
    const { offsetCommits } = commits();
    const sent: string[] = [];
    let calls = 0;
    let release: () => void = () => undefined;
    const hanging: CommitPort = {
      isRunning: () => true,
      commitOffsetsIfNecessary: async (request) => {
        calls += 1;
        if (calls <= 2) throw new Error('This is not the correct coordinator for this group');
        if (calls === 3) await new Promise<void>((resolve) => (release = resolve));
        for (const { partitions } of request.topics) for (const { partition, offset } of partitions) sent.push(`${partition}@${offset}`);
      },
    };
    await offsetCommits.commit(hanging, [{ topic: 'reviews', partition: 1, offset: '20' }], place);
    await offsetCommits.commit(hanging, [{ topic: 'reviews', partition: 2, offset: '30' }], { ...place, partition: 2 });

    // Act: the retry starts, the join forgets, then the hanging commit returns
    await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
    offsetCommits.forget();
    release();
    await vi.advanceTimersByTimeAsync(60_000);

    // Assess: the one in flight was sent before the join; partition 2's retry never was
    expect(sent).toEqual(['1@20']);
    expect(calls).toBe(3);
    expect(offsetCommits.state.pending.size).toBe(0);
  });

  it('refuse, never send, a commit below the offset read as committed at assignment: logged as a bug and counted', async () => {
    // Prepare: partition 1 was committed at 500 when this member was assigned it
    const { offsetCommits, lines, committed, refused } = commits(new Map([[1, 500n]]));
    const target = port(0);

    // Act: a stale position brought records below it back, and their commit is asked for; then a proper one
    await offsetCommits.commit(target.port, [{ topic: 'reviews', partition: 1, offset: '120' }], place);
    await offsetCommits.commit(target.port, [{ topic: 'reviews', partition: 1, offset: '500' }], place);
    await offsetCommits.commit(target.port, [{ topic: 'reviews', partition: 2, offset: '3' }], { ...place, partition: 2 });

    // Assess
    expect(target.sent).toEqual(['1@500', '2@3']);
    expect(committed).toEqual(['1@500', '2@3']);
    expect(refused()).toBe(1);
    expect(
      lines.filter((line) => line.level === 'error').map((line) => [line.message, line.fields.offset, line.fields.committedAtAssignment]),
    ).toEqual([['bug: an offset commit below the committed offset read at assignment was refused, not sent', '120', '500']]);
  });

  it('fail the pipeline at MAX_COMMIT_FAILURES refused commits in a row, naming the count', async () => {
    // Prepare
    const { offsetCommits, failures } = commits();
    const refused = port(1_000);

    // Act: one stored event after another, each commit refused
    for (let event = 1; event <= MAX_COMMIT_FAILURES; event += 1) {
      await offsetCommits.commit(refused.port, [{ topic: 'reviews', partition: 1, offset: String(20 + event) }], place);
    }

    // Assess
    expect(failures).toEqual([`${MAX_COMMIT_FAILURES} offset commits in a row failed`]);
    expect(offsetCommits.state.pending.get(1)?.offset).toBe(String(20 + MAX_COMMIT_FAILURES));
  });
});
