import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffCeilingMs, backoffDelayMs } from '../../../shared/backoff.js';

describe('backoffDelayMs (equal jitter)', () => {
  it('stays between half of the doubling ceiling and the ceiling, for any draw', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 60_000 }),
        fc.integer({ min: 1, max: 600_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (retry, baseMs, maxMs, draw) => {
          // Act
          const ceiling = backoffCeilingMs(retry, baseMs, maxMs);
          const delay = backoffDelayMs(retry, baseMs, maxMs, () => draw);

          // Assess
          expect(ceiling).toBe(Math.min(baseMs * 2 ** (retry - 1), maxMs));
          expect(delay).toBeGreaterThanOrEqual(Math.floor(ceiling / 2));
          expect(delay).toBeLessThanOrEqual(ceiling);
          expect(Number.isInteger(delay)).toBe(true);
        },
      ),
    );
  });

  it('gives the ceiling for a draw of 0 and about half of it for a draw near 1', () => {
    expect([1, 2, 3, 4, 5].map((retry) => backoffDelayMs(retry, 1_000, undefined, () => 0))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000]);
    expect([1, 2, 3, 4, 5].map((retry) => backoffDelayMs(retry, 1_000, undefined, () => 0.999_999))).toEqual([
      500, 1_000, 2_000, 4_000, 8_000,
    ]);
  });

  it('spreads the waits of hosts that failed together (Math.random by default)', () => {
    // Act: 200 hosts draw their wait before the third retry
    const waits = new Set(Array.from({ length: 200 }, () => backoffDelayMs(3, 1_000)));

    // Assess: not lock-step, and inside [2 s, 4 s]
    expect(waits.size).toBeGreaterThan(50);
    for (const wait of waits) expect(wait >= 2_000 && wait <= 4_000).toBe(true);
  });
});
