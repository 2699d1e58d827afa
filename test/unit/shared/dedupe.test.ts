import { describe, expect, it } from 'vitest';
import { dedupeByKey } from '../../../shared/dedupe.js';

interface Review {
  readonly reviewId: string;
  readonly lastSyncedAt: string;
  readonly offset: number;
}

const review = (reviewId: string, lastSyncedAt: string, offset: number): Review => ({ reviewId, lastSyncedAt, offset });
const newerSync = (candidate: Review, kept: Review) => candidate.lastSyncedAt > kept.lastSyncedAt;

describe('dedupeByKey', () => {
  it('keeps the first item per key by default and counts the dropped ones', () => {
    // Prepare
    const items = [review('a', 't1', 1), review('b', 't1', 2), review('a', 't9', 3), review('a', 't5', 4)];

    // Act
    const { kept, dropped } = dedupeByKey(items, (item) => item.reviewId);

    // Assess
    expect(kept.map((item) => item.offset)).toEqual([1, 2]);
    expect(dropped).toBe(2);
  });

  it('keeps the preferred item, in the position where its key first appeared', () => {
    // Prepare
    const items = [
      review('a', '2026-11-30T06:00:00.000001+00:00', 1),
      review('b', '2026-11-30T06:00:00.000000+00:00', 2),
      review('a', '2026-11-30T06:00:00.000003+00:00', 3),
      review('a', '2026-11-30T06:00:00.000002+00:00', 4),
    ];

    // Act
    const { kept, dropped } = dedupeByKey(items, (item) => item.reviewId, newerSync);

    // Assess
    expect(kept.map((item) => item.offset)).toEqual([3, 2]);
    expect(dropped).toBe(2);
  });

  it('on a tie keeps the one that came first', () => {
    // Prepare
    const items = [review('a', 't5', 1), review('a', 't5', 2)];

    // Act
    const { kept } = dedupeByKey(items, (item) => item.reviewId, newerSync);

    // Assess
    expect(kept.map((item) => item.offset)).toEqual([1]);
  });

  it('returns every item when all keys differ, and nothing for nothing', () => {
    // Prepare
    const items = [review('a', 't', 1), review('b', 't', 2), review('c', 't', 3)];

    // Act
    const distinct = dedupeByKey(items, (item) => item.reviewId);
    const empty = dedupeByKey([] as Review[], (item) => item.reviewId);

    // Assess
    expect(distinct).toEqual({ kept: items, dropped: 0 });
    expect(empty).toEqual({ kept: [], dropped: 0 });
  });

  it('does not change its input', () => {
    // Prepare
    const items = Object.freeze([review('a', 't1', 1), review('a', 't2', 2)]);

    // Act
    const { kept } = dedupeByKey(items, (item) => item.reviewId, newerSync);

    // Assess
    expect(kept.map((item) => item.offset)).toEqual([2]);
    expect(items.map((item) => item.offset)).toEqual([1, 2]);
  });
});
