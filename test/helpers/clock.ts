import type { Clock } from '../../host/clock.js';

/**
 * A clock driven by hand: `advance` moves both sides by the same duration (time passes),
 * `stepWall` moves only the wall clock (an NTP step, `date -s`, a resumed VM).
 */
export class ManualClock implements Clock {
  private mono: number;
  private wallOffset: number;

  constructor(start = 1_000_000, wallStart = Date.parse('2026-12-01T12:00:00Z')) {
    this.mono = start;
    this.wallOffset = wallStart - start;
  }

  monotonic(): number {
    return this.mono;
  }

  wall(): number {
    return this.mono + this.wallOffset;
  }

  advance(ms: number): void {
    this.mono += ms;
  }

  stepWall(ms: number): void {
    this.wallOffset += ms;
  }
}
