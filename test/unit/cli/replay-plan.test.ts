import { describe, expect, it } from 'vitest';
import type { GroupPosition, PartitionPosition } from '../../../kafka/lag.js';
import { describeSkips, planReplay } from '../../../cli/replay-plan.js';

function position(partitions: ReadonlyArray<Omit<PartitionPosition, 'lag'>>): GroupPosition {
  return {
    pipeline: 'reviews',
    group: 'storage-consumer.reviews',
    topic: 'reviews',
    state: 'Empty',
    members: [],
    partitions: partitions.map((partition) => ({ ...partition, lag: 0n })),
    lag: 0n,
  };
}

describe('planReplay', () => {
  const group = position([
    { partition: 0, committed: 40n, start: 0n, end: 50n }, // consumed up to 40
    { partition: 1, committed: null, start: 10n, end: 30n }, // never committed: would read from 10
    { partition: 2, committed: 5n, start: 20n, end: 25n }, // its offset fell off the log: would read from 20
  ]);

  it('counts as skipped only what lies between where the group would read next and the target', () => {
    // Act
    const steps = planReplay(
      group,
      new Map([
        [0, 50n],
        [1, 30n],
        [2, 25n],
      ]),
    );

    // Assess
    expect(steps.map((step) => [step.partition, step.before, step.after, step.skipped])).toEqual([
      [0, 40n, 50n, 10n],
      [1, null, 30n, 20n],
      [2, 5n, 25n, 5n],
    ]);
    expect(describeSkips(steps)).toBe(
      'partition 0: 10 offset(s) (40 to 49); partition 1: 20 offset(s) (10 to 29); partition 2: 5 offset(s) (20 to 24)',
    );
  });

  it('skips nothing when moving back or staying, and plans only the partitions named', () => {
    const steps = planReplay(
      group,
      new Map([
        [0, 12n],
        [2, 20n],
      ]),
    );

    expect(steps.map((step) => [step.partition, step.skipped])).toEqual([
      [0, 0n],
      [2, 0n],
    ]);
    expect(describeSkips(steps)).toBe('');
  });
});
