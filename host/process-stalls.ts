/**
 * The host's own stalls: spans in which the process itself did not run (SIGSTOP, `docker pause`,
 * a suspended VM, a GC pause or a blocked event loop of seconds). The progress watches
 * (./progress-watch.ts) observe it at every tick and every reader of a progress record observes
 * it through the record's snapshot (./progress.ts), so a gap between two observations far longer
 * than the watch's tick is noticed by whichever runs first after it: a `/readyz` answered before
 * the watch's next tick sees the same resume as the watch. Every bound of the progress rules
 * restarts at the resume (docs/operations.md, "The rules behind the signals"): a host that was
 * not running could not fetch, and gets its full bound once it runs again.
 */
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';

/**
 * How much later than its tick an observation may come before the gap counts as a stall of the
 * process. A tick is late by milliseconds on a loaded machine, and by up to a second in V8's
 * longest full collections on a heap of the host's size; 5 s is far beyond either, so nothing but
 * a process that did not run is counted. A shorter gap counts against the bounds as any other
 * time does (at the defaults, 5 s of a 30 s unready bound). Longer would let a freeze of a few
 * seconds more eat into a short bound unexcused; shorter would call a slow machine a stall.
 */
export const STALL_LATENESS_MS = 5_000;

/** One stall of the process, on the monotonic clock. */
export interface ProcessStall {
  /** The last moment the process was seen running before the gap. */
  readonly from: number;
  /** The first moment it was seen running again: every bound restarts here. */
  readonly to: number;
  /** `to - from`. */
  readonly ms: number;
}

/** The stalls of one process (one per clock: see {@link processStallsOf}). */
export class ProcessStalls {
  private readonly clock: Clock;
  private readonly latenessMs: number;
  /** The tick of each watch that observes (armed); measuring only happens while one does. */
  private readonly watchers = new Map<symbol, number>();
  private lastSeenAt: number | undefined;
  private lastResumeAt: number | undefined;
  private unreported: ProcessStall[] = [];
  private stallCount = 0;
  private stalledMs = 0;

  constructor(options: { readonly clock?: Clock; readonly latenessMs?: number } = {}) {
    this.clock = options.clock ?? systemClock;
    this.latenessMs = options.latenessMs ?? STALL_LATENESS_MS;
  }

  /**
   * A watch observes from now at least every `intervalMs` (its tick); returns the function that
   * ends that. Gaps are only measured while a watch observes: before the first one and after the
   * last one nothing is expected to run.
   */
  watch(intervalMs: number): () => void {
    const key = Symbol('watch');
    if (this.watchers.size === 0) this.lastSeenAt = this.clock.monotonic();
    this.watchers.set(key, intervalMs);
    return () => {
      this.watchers.delete(key);
      if (this.watchers.size === 0) this.lastSeenAt = undefined;
    };
  }

  /**
   * The process runs at `now`: a gap since the last observation longer than the slowest watch's
   * tick plus {@link STALL_LATENESS_MS} is a stall, counted once. Returns the moment the process
   * last ran again after a stall (`undefined`: never stalled).
   */
  observe(now: number = this.clock.monotonic()): number | undefined {
    if (this.lastSeenAt !== undefined && now > this.lastSeenAt) {
      const gap = now - this.lastSeenAt;
      if (gap > Math.max(...this.watchers.values()) + this.latenessMs) {
        const stall = { from: this.lastSeenAt, to: now, ms: gap };
        this.unreported.push(stall);
        this.stallCount += 1;
        this.stalledMs += gap;
        this.lastResumeAt = now;
      }
    }
    if (this.lastSeenAt !== undefined) this.lastSeenAt = Math.max(this.lastSeenAt, now);
    return this.lastResumeAt;
  }

  /** The moment the process last ran again after a stall, as last observed (`undefined`: never). */
  get resumedAt(): number | undefined {
    return this.lastResumeAt;
  }

  /** The stalls not yet taken by a watch (each is logged once, by the first watch that takes it). */
  takeUnreported(): ProcessStall[] {
    const taken = this.unreported;
    this.unreported = [];
    return taken;
  }

  /** Stalls since the start, and their total length in seconds. */
  totals(): { readonly count: number; readonly seconds: number } {
    return { count: this.stallCount, seconds: this.stalledMs / 1000 };
  }
}

const byClock = new WeakMap<Clock, ProcessStalls>();

/**
 * The stalls of the process whose time `clock` tells: one object per clock, so every pipeline's
 * record and watch (and `/metrics`) of one host share it, and a stall is logged and counted once.
 */
export function processStallsOf(clock: Clock = systemClock): ProcessStalls {
  let stalls = byClock.get(clock);
  if (stalls === undefined) {
    stalls = new ProcessStalls({ clock });
    byClock.set(clock, stalls);
  }
  return stalls;
}
