import type { GroupPosition } from '../kafka/lag.js';

/** One partition of a replay: where the group is, where it goes, and what that skips. */
export interface ReplayStep {
  readonly partition: number;
  /** The committed offset now; `null` when the group never committed (it would read from `start`). */
  readonly before: bigint | null;
  /** The offset the replay commits. */
  readonly after: bigint;
  readonly start: bigint;
  readonly end: bigint;
  /** Messages the group has not consumed and would never see: `after` beyond where it would read next. */
  readonly skipped: bigint;
}

/**
 * The replay of `position`'s group to `targets` (partition -> offset), partition by partition.
 * A group reads next from its committed offset, or from the earliest message kept when it never
 * committed or its offset fell off the log: moving beyond that skips the messages between.
 * Pure.
 */
export function planReplay(position: GroupPosition, targets: ReadonlyMap<number, bigint>): ReplayStep[] {
  return position.partitions
    .filter((partition) => targets.has(partition.partition))
    .map(({ partition, committed, start, end }) => {
      const after = targets.get(partition) as bigint;
      const next = committed === null || committed < start ? start : committed;
      return { partition, before: committed, after, start, end, skipped: after > next ? after - next : 0n };
    });
}

/** The steps that skip offsets, as the refusal names them: `partition 2: 6 offset(s) (30 to 35)`. */
export function describeSkips(steps: readonly ReplayStep[]): string {
  return steps
    .filter((step) => step.skipped > 0n)
    .map((step) => `partition ${step.partition}: ${step.skipped} offset(s) (${step.after - step.skipped} to ${step.after - 1n})`)
    .join('; ');
}
