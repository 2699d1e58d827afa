/**
 * Heartbeats belong to one host process (issue 26): two hosts of one pipeline on one machine,
 * the documented first host (every pipeline) and a second one with `STORAGE_PIPELINES=reviews`,
 * sharing the default heartbeat folder (`<os tmpdir>/storage-consumer/heartbeats`, no
 * `STORAGE_HEARTBEAT_DIR`). The second is frozen with SIGSTOP past the health check's limit:
 * its `storage-consumer healthcheck` fails, although the first keeps writing reviews' heartbeat
 * beside it, and the first's passes. Thawed, it passes again; stopped, it is "not running".
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultMaxAgeMs } from '../../host-api/heartbeat-files.js';
import { runBin } from '../helpers/cli.js';
import type { CliRun } from '../helpers/cli.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { createTestPipelines, hostEnvironment, killAllHosts, spawnHost, stateIs, temporaryDirectory, waitUntil } from '../helpers/host.js';
import type { HostProcess } from '../helpers/host.js';

let schema: TestSchema;
let machineTmp: { path: string; remove: () => Promise<void> };

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostbeats');
  // The machine's temporary folder, for this file alone: the default heartbeat folder lies in it.
  machineTmp = await temporaryDirectory('host-beats-tmp-');
});

afterAll(async () => {
  await killAllHosts();
  await schema?.drop();
  await machineTmp?.remove();
});

/** The health check as a container's HEALTHCHECK runs it: the bin, in a process of its own. */
async function healthcheck(env: Record<string, string>, args: string[] = []): Promise<CliRun> {
  const run = await runBin(['healthcheck', ...args], env);
  console.log(
    `$ storage-consumer healthcheck ${args.join(' ')}  (STORAGE_PIPELINES=${env.STORAGE_PIPELINES ?? 'all'})\n${run.stdout}${run.stderr}exit ${run.code}`,
  );
  return run;
}

const frozenFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('two hosts of one pipeline on one machine', () => {
  it('a frozen host fails its own healthcheck while the other, writing the same pipeline, passes its', async () => {
    // Prepare: the first host runs every pipeline, the second reviews only; one default folder
    const names = await createTestPipelines('host-beats');
    const common: Record<string, string> = { ...hostEnvironment({ databaseUrl: schema.url, names }), TMPDIR: machineTmp.path };
    expect(common.STORAGE_HEARTBEAT_DIR).toBeUndefined();
    const firstEnv = common;
    const secondEnv = { ...common, STORAGE_PIPELINES: 'reviews' };
    const first: HostProcess = spawnHost(firstEnv);
    const second: HostProcess = spawnHost(secondEnv);
    await Promise.all([first.waitForLog(stateIs('Running'), 120_000), second.waitForLog(stateIs('Running'), 120_000)]);
    const [firstPid, secondPid] = [first.child.pid as number, second.child.pid as number];
    const folder = join(machineTmp.path, 'storage-consumer', 'heartbeats');
    const files = await waitUntil(
      'both hosts to write their heartbeats',
      async () => {
        const present = (await readdir(folder)).sort();
        return present.includes(`reviews.${firstPid}.heartbeat`) && present.includes(`reviews.${secondPid}.heartbeat`) && present;
      },
      30_000,
      100,
    );
    console.log(`${folder}: ${files.join(', ')} (first host pid ${firstPid}, second host pid ${secondPid})`);
    expect(files).toHaveLength(4);
    // 3 heartbeat intervals (500 ms) plus one poll timeout (1 s)
    const limitMs = defaultMaxAgeMs(500, 1_000);

    // Act / Assess: both healthy; without --pid the check will not guess which host is meant
    expect(await healthcheck(secondEnv, ['--pid', String(secondPid)])).toMatchObject({ code: 0, stdout: 'healthy: reviews\n' });
    const unnamed = await healthcheck(secondEnv);
    expect(unnamed.code).toBe(1);
    expect(unnamed.stdout).toContain(`2 host processes write heartbeats in ${folder}`);

    // Act: freeze the second host for twice the limit
    second.child.kill('SIGSTOP');
    try {
      await frozenFor(2 * limitMs);
      const frozen = await healthcheck(secondEnv, ['--pid', String(secondPid)]);
      const other = await healthcheck(firstEnv, ['--pid', String(firstPid)]);
      const otherReviews = await healthcheck(secondEnv, ['--pid', String(firstPid)]);

      // Assess: the frozen host fails on its own file; the other's fresh reviews file does not help it
      expect(frozen.code).toBe(1);
      expect(frozen.stdout).toMatch(
        new RegExp(
          `^unhealthy: reviews: heartbeat (\\d+) ms old \\(limit ${limitMs} ms\\) in ${folder}/reviews\\.${secondPid}\\.heartbeat\\n$`,
        ),
      );
      expect(Number(/heartbeat (\d+) ms old/.exec(frozen.stdout)?.[1])).toBeGreaterThanOrEqual(2 * limitMs - 500);
      expect(other).toMatchObject({ code: 0, stdout: 'healthy: app-stats, reviews, network-metrics\n' });
      expect(otherReviews).toMatchObject({ code: 0, stdout: 'healthy: reviews\n' });
    } finally {
      second.child.kill('SIGCONT');
    }

    // Act / Assess: thawed, it writes again and passes again
    await waitUntil(
      'the thawed host to pass its healthcheck',
      async () => (await runBin(['healthcheck', '--pid', String(secondPid)], secondEnv)).code === 0,
      30_000,
      250,
    );
    expect(await healthcheck(secondEnv, ['--pid', String(secondPid)])).toMatchObject({ code: 0 });

    // Act: stop the second host
    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);

    // Assess: it is not running, so it never passes; with one running host left, the check needs no --pid
    const stopped = await healthcheck(secondEnv, ['--pid', String(secondPid)]);
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toMatch(new RegExp(`^unhealthy: reviews: host process ${secondPid} is not running \\(heartbeat \\d+ ms old`));
    expect(await healthcheck(firstEnv)).toMatchObject({ code: 0, stdout: 'healthy: app-stats, reviews, network-metrics\n' });

    first.child.kill('SIGTERM');
    expect((await first.exited).code).toBe(0);
  }, 180_000);
});
