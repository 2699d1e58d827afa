/**
 * The host runs a pipeline's partitions side by side, each batch an invocation of its own: every
 * line a batch logs carries that invocation's `function_request_id`, so a `message dead-lettered`
 * line can be tied to its `batch stored` line (issue 40: a shared logger stamped every batch's
 * lines with the id of the invocation that started last).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostLogLine, HostProcess, HostTestStack, PipelineNames } from '../helpers/host.js';
import {
  closeHostTestStack,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  openHostTestStack,
  spawnHost,
  stateIs,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

let stack: HostTestStack;
let names: PipelineNames;
let host: HostProcess | undefined;

beforeAll(async () => {
  stack = await openHostTestStack('host-request-ids');
  names = await createTestPipelines('host-request-ids');
});

afterAll(async () => {
  if (host !== undefined && host.child.exitCode === null) {
    host.child.kill('SIGTERM');
    await host.exited;
  }
  await closeHostTestStack(stack, []);
});

describe('function_request_id in the host log', () => {
  it('is one per batch, and a dead letter line carries the id of the batch that stored it', { timeout: 180_000 }, async () => {
    // Prepare: batches of 10 on the three reviews partitions, each with a poison message
    const env = hostEnvironment({
      databaseUrl: stack.schema.url,
      names,
      extra: { STORAGE_MAX_POLL_RECORDS_REVIEWS: '10', POWERTOOLS_LOG_LEVEL: 'INFO' },
    });
    host = spawnHost(env);
    await host.waitForLog(stateIs('Running'), 90_000);
    for (const partition of [0, 1, 2]) {
      const values = Array.from({ length: 60 }, (_, index) =>
        index % 10 === 3 ? 'not json' : { ...sampleReview(), review_id: `ids:${partition}:${index}` },
      );
      await produce(names.topics.reviews, jsonMessages(values, { partition }));
    }

    // Act
    await waitForCommittedToEnd(stack.admin, names.groups.reviews, names.topics.reviews, 120_000);
    host.child.kill('SIGTERM');
    await host.exited;

    // Assess
    const lines = host.lines.filter((line) => line.pipeline === 'reviews');
    const stored = lines.filter((line) => line.message === 'batch stored');
    const letters = lines.filter((line) => line.message === 'message dead-lettered');
    const ids = stored.map((line) => line.function_request_id);
    /** The stored batch whose event holds `letter`'s partition and offset. */
    const batchOf = (letter: HostLogLine) =>
      stored.find((line) =>
        (line.partitions as Array<{ partition: string; first: number; last: number }>).some(
          (range) =>
            range.partition === `${names.topics.reviews}-${String(letter.partition)}` &&
            range.first <= Number(letter.offset) &&
            Number(letter.offset) <= range.last,
        ),
      );
    const mismatched = letters.filter((letter) => batchOf(letter)?.function_request_id !== letter.function_request_id);
    console.log(
      `[request-ids] ${stored.length} batches stored, ${new Set(ids).size} distinct ids; ${letters.length} dead letter lines, ` +
        `${mismatched.length} with another batch's id`,
    );
    expect(stored.length).toBeGreaterThanOrEqual(18);
    expect(ids.every((id) => typeof id === 'string' && id !== '')).toBe(true);
    expect(new Set(ids).size).toBe(stored.length);
    expect(letters).toHaveLength(18);
    expect(mismatched).toEqual([]);
  });
});
