import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeHostTestStack,
  createTestPipelines,
  hostEnvironment,
  killAllHosts,
  openHostTestStack,
  spawnHost,
  stateIs,
} from '../helpers/host.js';
import type { HostLogLine, HostProcess, HostTestStack, PipelineNames } from '../helpers/host.js';
import { runBin } from '../helpers/cli.js';

// Settings that contradict each other (config/setting-declarations.ts, the rules between the poll
// timeout, the group's timers, the readiness bound and the stop) against the real host: refused
// at start, exit 1 at once, one line naming both variables; and the closest settings that keep
// to a rule start and stop cleanly, so it is the rule that refuses, nothing else of the environment.

/** A refusal comes before anything connects: well within this, a crash loop or a start never ends in it. */
const PROMPT_EXIT_MS = 20_000;

let stack: HostTestStack;
let names: PipelineNames;

beforeAll(async () => {
  stack = await openHostTestStack('host-settings-refused');
  names = await createTestPipelines('settings-refused');
}, 60_000);

afterAll(async () => {
  await killAllHosts();
  await closeHostTestStack(stack, []);
});

function environment(extra: Record<string, string>): Record<string, string> {
  return hostEnvironment({ databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path, extra });
}

/** The host's exit, how long it took from the spawn, and the lines it logged. */
async function runToExit(host: HostProcess): Promise<{ code: number | null; tookMs: number; lines: HostLogLine[] }> {
  const startedAt = performance.now();
  const { code } = await host.exited;
  return { code, tookMs: performance.now() - startedAt, lines: host.lines };
}

const refusals = (lines: readonly HostLogLine[]) => lines.filter((line) => line.message === 'invalid configuration');

/** `node bin/storage-consumer.js run`: the host as the CLI starts it. */
const CLI_RUN = { args: ['bin/storage-consumer.js', 'run'], cwd: fileURLToPath(new URL('../../', import.meta.url)) };

/** One rule family: the settings beside the helpers' environment, and the start of the problem the host names. */
interface RefusalCase {
  readonly family: string;
  readonly extra: Record<string, string>;
  readonly line: RegExp;
}

describe('the host refuses settings that contradict each other', () => {
  it.each<RefusalCase>([
    {
      family: 'poll vs unready',
      // A 20 s poll against the 30 s readiness bound: an idle healthy host would read NOT_FETCHING.
      extra: { STORAGE_POLL_TIMEOUT_MS: '20000', STORAGE_SESSION_TIMEOUT_MS: '60000', STORAGE_SHUTDOWN_TIMEOUT_MS: '30000' },
      line: /STORAGE_POLL_TIMEOUT_MS=20000 must be at most half of STORAGE_FETCH_UNREADY_AFTER_MS=30000: /,
    },
    {
      family: 'poll vs session',
      // The helpers' 6 s session heartbeats every 2 s: a 4 s poll leaves it no room.
      extra: { STORAGE_POLL_TIMEOUT_MS: '4000' },
      line: /STORAGE_POLL_TIMEOUT_MS=4000 plus the 2000 ms heartbeat interval must be shorter than STORAGE_SESSION_TIMEOUT_MS=6000: /,
    },
    {
      family: 'shutdown vs poll',
      extra: { STORAGE_SHUTDOWN_TIMEOUT_MS: '3000' },
      line: /STORAGE_SHUTDOWN_TIMEOUT_MS=3000 must be longer than STORAGE_POLL_TIMEOUT_MS=1000 \+ 2 s: /,
    },
  ])(
    '$family: exit 1 at once, one invalid configuration line naming both variables',
    async ({ family, extra, line }) => {
      // Act
      const { code, tookMs, lines } = await runToExit(spawnHost(environment(extra)));

      // Assess
      const refused = refusals(lines);
      console.log(`[settings-refused] ${family}: exit ${String(code)} after ${Math.round(tookMs)} ms: ${JSON.stringify(refused[0])}`);
      expect(code).toBe(1);
      expect(tookMs).toBeLessThan(PROMPT_EXIT_MS);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ level: 'ERROR', error: expect.stringMatching(new RegExp(`^ConfigurationError: ${line.source}`)) });
      expect(refused[0]?.problems).toEqual([expect.stringMatching(new RegExp(`^${line.source}`))]);
      // Refused before it connected: it never joined a group or ran.
      expect(lines.filter((entry) => typeof entry.state === 'string' || entry.message === 'joined the consumer group')).toEqual([]);
    },
    60_000,
  );

  it('poll vs rebalance, through `storage-consumer run`: exit 1 at once naming both variables', async () => {
    // Act: a 44 s poll and 3 s heartbeats against the 47 s rebalance timeout of a 37 s max poll interval
    const { code, tookMs, lines } = await runToExit(
      spawnHost(
        environment({
          STORAGE_POLL_TIMEOUT_MS: '44000',
          STORAGE_MAX_POLL_INTERVAL_MS: '37000',
          STORAGE_SESSION_TIMEOUT_MS: '60000',
          STORAGE_FETCH_UNREADY_AFTER_MS: '90000',
          STORAGE_SHUTDOWN_TIMEOUT_MS: '60000',
        }),
        CLI_RUN,
      ),
    );

    // Assess
    const refused = refusals(lines);
    console.log(
      `[settings-refused] poll vs rebalance (run): exit ${String(code)} after ${Math.round(tookMs)} ms: ${JSON.stringify(refused[0])}`,
    );
    expect(code).toBe(1);
    expect(tookMs).toBeLessThan(PROMPT_EXIT_MS);
    expect(refused[0]?.problems).toEqual([
      expect.stringMatching(
        /^STORAGE_POLL_TIMEOUT_MS=44000 plus the 3000 ms heartbeat interval must be shorter than the 47000 ms rebalance timeout \(STORAGE_MAX_POLL_INTERVAL_MS=37000 \+ 10 s\): /,
      ),
    ]);
  }, 60_000);

  it('starts with the closest settings that keep to the rules, and stops with exit 0', async () => {
    // Prepare: the largest poll the helpers' 6 s session allows (3999 + 2000 < 6000), and the
    // shortest stop beside it (3999 + 2 s < 6000)
    const host = spawnHost(environment({ STORAGE_POLL_TIMEOUT_MS: '3999', STORAGE_SHUTDOWN_TIMEOUT_MS: '6000' }));
    await host.waitForLog(stateIs('Running'), 60_000);
    await host.waitForLog((entry) => entry.message === 'joined the consumer group', 60_000);

    // Act
    const stop = runToExit(host);
    host.child.kill('SIGTERM');
    const { code, tookMs } = await stop;

    // Assess: stopped within the shortest shutdown timeout the rule allows beside this poll
    console.log(
      `[settings-refused] poll 3999 ms, session 6000 ms, shutdown 6000 ms: Running, SIGTERM, exit ${String(code)} after ${Math.round(tookMs)} ms`,
    );
    expect(refusals(host.lines)).toEqual([]);
    expect(host.lines.some((entry) => entry.message?.startsWith('shutdown timed out'))).toBe(false);
    expect(code).toBe(0);
  }, 120_000);
});

describe('the CLI refuses them too', () => {
  it('`config` exits 2 and `lag` exits 1, each naming both variables', async () => {
    // Act
    const env = environment({ STORAGE_POLL_TIMEOUT_MS: '4000' });
    const config = await runBin(['config'], env);
    const lag = await runBin(['lag'], env);

    // Assess
    const line = /STORAGE_POLL_TIMEOUT_MS=4000 plus the 2000 ms heartbeat interval must be shorter than STORAGE_SESSION_TIMEOUT_MS=6000/;
    console.log(`[settings-refused] config: exit ${config.code}: ${config.stderr.trim()}`);
    console.log(`[settings-refused] lag: exit ${lag.code}: ${lag.stderr.trim()}`);
    expect(config.code).toBe(2);
    expect(config.stderr).toMatch(line);
    expect(lag.code).toBe(1);
    expect(lag.stderr).toMatch(new RegExp(`^storage-consumer lag: ${line.source}`, 'm'));
  }, 60_000);
});
