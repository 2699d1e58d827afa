/**
 * A preload for a host's process (`node --import tsx --import <this file> host/main.ts`, see
 * {@link wallClockStepCommand}) that steps its wall clock on a signal, as an NTP step or `date -s`
 * steps a machine's: in a process with `TEST_WALL_CLOCK_STEP_MS` set, on SIGUSR2, `Date.now()`,
 * `new Date()` and `Date()` move by that many milliseconds (negative: back) from then on;
 * `performance.now()`, `process.hrtime` and timers are untouched. It writes one JSON line to
 * stderr once stepped. Other processes that load it (the test, for the command) are left alone.
 */
import { fileURLToPath } from 'node:url';

/** The host command (test/helpers/host.ts `HostCommand`) of a host whose wall clock steps on SIGUSR2. */
export function wallClockStepCommand(): { args: string[]; cwd: string } {
  return {
    args: ['--import', 'tsx', '--import', new URL(import.meta.url).href, 'host/main.ts'],
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
  };
}

function installWallClockStep(stepMs: number): void {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  let offsetMs = 0;
  const now = () => realNow() + offsetMs;
  RealDate.now = now;
  globalThis.Date = new Proxy(RealDate, {
    construct: (target, args: unknown[], newTarget: NewableFunction) =>
      Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget) as object,
    apply: (target) => new target(now()).toString(),
  });
  process.on('SIGUSR2', () => {
    offsetMs = stepMs;
    process.stderr.write(
      `${JSON.stringify({ message: 'test: wall clock stepped', stepMs, wallNow: new Date().toISOString(), realNow: new RealDate(realNow()).toISOString() })}\n`,
    );
  });
}

const step = process.env.TEST_WALL_CLOCK_STEP_MS;
if (step !== undefined) installWallClockStep(Number(step));
