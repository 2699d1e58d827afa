import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkHeartbeats, createHeartbeat, defaultMaxAgeMs, heartbeatFile } from '../../../host-api/heartbeat-files.js';
import { runCli } from '../../helpers/cli.js';

/** A process id above any kernel's pid_max: never a running process. */
const DEAD_PID = 2_147_483_000;

const directories: string[] = [];
async function temporaryDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'heartbeat-unit-'));
  directories.push(directory);
  return directory;
}
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

/** Writes a heartbeat file as a host process `pid` would, `ageMs` old by its modification time. */
async function plantHeartbeat(dir: string, pipeline: string, pid: number, ageMs = 0): Promise<string> {
  const file = heartbeatFile(dir, pipeline, pid);
  await writeFile(file, '');
  const at = new Date(Date.now() - ageMs);
  await utimes(file, at, at);
  return file;
}

describe('heartbeat files', () => {
  it('writes its own process file at most once per interval', async () => {
    // Prepare
    const dir = join(await temporaryDirectory(), 'beats');
    let now = 1_000_000;
    const heartbeat = createHeartbeat({ dir, pipeline: 'reviews', intervalMs: 5_000, logger: console, now: () => now });

    // Act
    heartbeat.beat();
    await settle();
    const first = await readFile(heartbeatFile(dir, 'reviews'), 'utf8');
    now += 4_000;
    heartbeat.beat();
    await settle();
    const unchanged = await readFile(heartbeatFile(dir, 'reviews'), 'utf8');
    now += 1_000;
    heartbeat.beat();
    await settle();
    const rewritten = await readFile(heartbeatFile(dir, 'reviews'), 'utf8');

    // Assess
    expect(heartbeatFile(dir, 'reviews')).toBe(join(dir, `reviews.${process.pid}.heartbeat`));
    expect(JSON.parse(first)).toMatchObject({ pid: process.pid, pipeline: 'reviews' });
    expect(unchanged).toBe(first);
    expect(rewritten).not.toBe(first);
  });

  it('warns once about a failing write and never throws', async () => {
    // Prepare: the directory is a file
    const blocker = join(await temporaryDirectory(), 'not-a-dir');
    await writeFile(blocker, '');
    const warnings: string[] = [];
    const logger = { ...console, warn: (message: string) => warnings.push(message) };
    let now = 0;
    const heartbeat = createHeartbeat({ dir: blocker, pipeline: 'reviews', intervalMs: 1, logger, now: () => (now += 10) });

    // Act
    for (let beat = 0; beat < 5; beat += 1) {
      heartbeat.beat();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }

    // Assess
    expect(warnings).toHaveLength(1);
  });

  it('removes at its start the files a process that no longer runs left, not those of running ones', async () => {
    // Prepare
    const dir = await temporaryDirectory();
    const left = await plantHeartbeat(dir, 'reviews', DEAD_PID, 60_000);
    const justWritten = await plantHeartbeat(dir, 'reviews', DEAD_PID + 1);
    const parent = await plantHeartbeat(dir, 'reviews', process.ppid, 60_000);
    const otherPipeline = await plantHeartbeat(dir, 'app-stats', DEAD_PID, 60_000);

    // Act
    createHeartbeat({ dir, pipeline: 'reviews', intervalMs: 1_000, logger: console });
    await settle();

    // Assess: a recent file may belong to a writer elsewhere; each pipeline cleans its own files
    expect([left, justWritten, parent, otherPipeline].map((file) => existsSync(file))).toEqual([false, true, true, true]);
  });
});

describe('checkHeartbeats', () => {
  it('names each pipeline whose heartbeat is missing or stale', async () => {
    // Prepare
    const dir = await temporaryDirectory();
    await plantHeartbeat(dir, 'app-stats', process.pid);
    await plantHeartbeat(dir, 'reviews', process.pid, 60_000);

    // Act
    const check = await checkHeartbeats({ dir, pipelines: ['app-stats', 'reviews', 'network-metrics'], maxAgeMs: 16_000 });

    // Assess
    expect(check.pid).toBe(process.pid);
    expect(check.problems.map(({ pipeline, reason, ageMs }) => [pipeline, reason, ageMs === undefined || ageMs > 16_000])).toEqual([
      ['reviews', 'stale', true],
      ['network-metrics', 'missing', true],
    ]);
    expect(defaultMaxAgeMs(5_000, 1_000)).toBe(16_000);
  });

  it("checks one host process's files: another's fresh file never makes a frozen one pass", async () => {
    // Prepare: two running hosts of reviews, the frozen one last wrote a minute ago
    const dir = await temporaryDirectory();
    const [writing, frozen] = [1_001, 1_002];
    await plantHeartbeat(dir, 'reviews', writing);
    await plantHeartbeat(dir, 'reviews', frozen, 60_000);
    const runs = () => true;
    const check = (pid?: number) => checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000, pid, runs });

    // Act
    const [ofWriting, ofFrozen, unnamed] = await Promise.all([check(writing), check(frozen), check()]);

    // Assess
    expect(ofWriting).toMatchObject({ pid: writing, problems: [] });
    expect(ofFrozen.problems).toMatchObject([{ pipeline: 'reviews', pid: frozen, reason: 'stale' }]);
    expect(ofFrozen.problems[0]?.message).toMatch(/^reviews: heartbeat \d+ ms old \(limit 16000 ms\) in .*reviews\.1002\.heartbeat$/);
    expect(unnamed.pid).toBeNull();
    expect(unnamed.problems).toMatchObject([{ pipeline: null, reason: 'several_hosts' }]);
    expect(unnamed.problems[0]?.message).toContain('pid 1001 (reviews), pid 1002 (reviews); name the one to check with --pid');
  });

  it('fails a process that does not run, even with a fresh file, and ignores it when another runs', async () => {
    // Prepare: a host killed a moment ago, and its successor
    const dir = await temporaryDirectory();
    await plantHeartbeat(dir, 'reviews', DEAD_PID);
    await plantHeartbeat(dir, 'reviews', process.pid);

    // Act
    const ofDead = await checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000, pid: DEAD_PID });
    const unnamed = await checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000 });
    await rm(heartbeatFile(dir, 'reviews', process.pid));
    const onlyDead = await checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000 });

    // Assess
    expect(ofDead.problems).toMatchObject([{ reason: 'not_running', pid: DEAD_PID }]);
    expect(ofDead.problems[0]?.message).toMatch(new RegExp(`^reviews: host process ${DEAD_PID} is not running \\(heartbeat \\d+ ms old`));
    expect(unnamed).toMatchObject({ pid: process.pid, problems: [] });
    expect(onlyDead).toMatchObject({ pid: DEAD_PID, problems: [{ reason: 'not_running' }] });
  });

  it.runIf(existsSync('/proc/sys/kernel/random/boot_id'))(
    'reads the age on the monotonic clock: a wall-clock step back does not freshen a file',
    async () => {
      // Prepare: the file was written 60 s ago by the monotonic clock; its modification time (the
      // wall clock) says now, as after a step back of a minute
      const dir = await temporaryDirectory();
      const file = heartbeatFile(dir, 'reviews', process.pid);
      const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
      const monotonicNow = Number(process.hrtime.bigint() / 1_000_000n);
      const content = { pid: process.pid, pipeline: 'reviews', written_at: new Date().toISOString(), boot_id: bootId };
      await writeFile(file, JSON.stringify({ ...content, monotonic_ms: monotonicNow - 60_000 }));

      // Act
      const stepped = await checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000, monotonicNow });
      await writeFile(file, JSON.stringify({ ...content, boot_id: 'another boot', monotonic_ms: monotonicNow - 60_000 }));
      const otherBoot = await checkHeartbeats({ dir, pipelines: ['reviews'], maxAgeMs: 16_000, monotonicNow });

      // Assess: another boot's monotonic time means nothing here: the file time decides
      expect(stepped.problems).toMatchObject([{ reason: 'stale', ageMs: 60_000 }]);
      expect(otherBoot.problems).toEqual([]);
    },
  );
});

describe('storage-consumer healthcheck', () => {
  it('exits 0 when every selected pipeline is fresh and 1 otherwise', async () => {
    // Prepare
    const dir = await temporaryDirectory();
    await plantHeartbeat(dir, 'reviews', process.pid);
    const env = { STORAGE_HEARTBEAT_DIR: dir, STORAGE_PIPELINES: 'reviews' };

    // Act
    const fresh = await runCli(['healthcheck'], env);
    const json = await runCli(['healthcheck', '--json'], env);
    const missing = await runCli(['healthcheck'], { ...env, STORAGE_PIPELINES: 'reviews,network-metrics' });
    const stale = await runCli(['healthcheck', '--max-age', '1ms'], env);
    const unusable = await runCli(['healthcheck', '--max-age', 'x'], env);
    const badPid = await runCli(['healthcheck', '--pid', '12a'], env);

    // Assess
    expect(fresh).toMatchObject({ code: 0, stdout: 'healthy: reviews\n' });
    expect(JSON.parse(json.stdout)).toMatchObject({ healthy: true, pid: process.pid, hosts: [{ pid: process.pid, running: true }] });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/^unhealthy: network-metrics: no heartbeat file /);
    expect(stale.code).toBe(1);
    expect(stale.stdout).toMatch(/^unhealthy: reviews: heartbeat \d+ ms old \(limit 1 ms\)/);
    expect(unusable.code).toBe(2);
    expect(unusable.stderr).toMatch(/--max-age must be a duration/);
    expect(badPid.code).toBe(2);
    expect(badPid.stderr).toMatch(/--pid must be a process id/);
  });

  it('with two running hosts in the folder, checks the one --pid names', async () => {
    // Prepare: this process and its parent both "write" reviews; the parent's file is stale
    const dir = await temporaryDirectory();
    await plantHeartbeat(dir, 'reviews', process.pid);
    await plantHeartbeat(dir, 'reviews', process.ppid, 60_000);
    const env = { STORAGE_HEARTBEAT_DIR: dir, STORAGE_PIPELINES: 'reviews' };

    // Act
    const unnamed = await runCli(['healthcheck'], env);
    const own = await runCli(['healthcheck', '--pid', String(process.pid)], env);
    const parent = await runCli(['healthcheck', '--pid', String(process.ppid)], env);
    const dead = await runCli(['healthcheck', '--pid', String(DEAD_PID)], env);

    // Assess
    expect(unnamed.code).toBe(1);
    expect(unnamed.stdout).toMatch(/^unhealthy: 2 host processes write heartbeats in .*; name the one to check with --pid\n$/);
    expect(own).toMatchObject({ code: 0, stdout: 'healthy: reviews\n' });
    expect(parent.code).toBe(1);
    expect(parent.stdout).toMatch(/^unhealthy: reviews: heartbeat \d+ ms old/);
    expect(dead.code).toBe(1);
    expect(dead.stdout).toMatch(/^unhealthy: reviews: no heartbeat file .*reviews\.2147483000\.heartbeat\n$/);
  });
});
