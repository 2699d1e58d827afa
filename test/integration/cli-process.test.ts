/**
 * Every CLI command as an operator runs it: a child process through the package's bin (or npx),
 * on a real PostgreSQL and broker. What only a process shows is checked here: Node's own
 * warnings on stderr (a DeprecationWarning is printed once per process, never through the CLI's
 * streams), and that the command `dlq purge` prints to delete exactly its set can be pasted into
 * the shell that ran it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliRun } from '../helpers/cli.js';
import { runBin } from '../helpers/cli.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import { closeHostTestStack, createTestPipelines, hostEnvironment, openHostTestStack, spawnHost, stateIs } from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

let stack: HostTestStack;
let names: PipelineNames;
let env: Record<string, string>;

beforeAll(async () => {
  stack = await openHostTestStack('cli-process');
  names = await createTestPipelines('cli-process');
  env = hostEnvironment({ databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path });
  await produce(names.topics.reviews, [{ partition: 0, value: JSON.stringify({ ...sampleReview(), review_id: 'process:1' }) }]);
  // Two old re-driven dead letters, for list, show and purge.
  await stack.schema.pool.query(
    `INSERT INTO dead_letter_events (pipeline, topic, partition, kafka_offset, payload, payload_size, payload_sha256, reason, detail,
                                     created_at, redriven_at)
     SELECT 'reviews', $1, 0, n, 'x', 1, sha256(n::text::bytea), 'invalid_json', 'not valid JSON', now() - interval '40 days',
            now() - interval '39 days'
       FROM generate_series(1000, 1001) AS n`,
    [names.topics.reviews],
  );
});

afterAll(() => closeHostTestStack(stack, []));

/** Runs `npx storage-consumer <argv>` in the repository, in a child process with exactly `env` (plus PATH and HOME). */
function runNpx(argv: readonly string[], environment: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['--no-install', 'storage-consumer', ...argv], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...environment },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Node's warnings a process printed (`(node:123) DeprecationWarning: ...`, `[DEP0040] ...`). */
const warningsIn = (stderr: string) => stderr.split('\n').filter((line) => /Warning|\[DEP\d+\]/.test(line));

describe('every CLI command in a process of its own', () => {
  it('prints no DeprecationWarning (nor any other Node warning), touching PostgreSQL and Kafka', { timeout: 300_000 }, async () => {
    // Prepare: every command, with arguments that make it reach its services
    const dryRun = ['replay', 'reviews', '--to', 'earliest', '--create-group', '--dry-run'];
    const commands: ReadonlyArray<readonly string[]> = [
      ['--version'],
      ['migrate'],
      ['config'],
      ['healthcheck', '--pid', '1'],
      ['verify'],
      ['status'],
      ['lag', '--json'],
      ['pause', 'network-metrics', '--reason', 'process test'],
      ['resume', 'network-metrics'],
      dryRun,
      ['peek', 'reviews', '--partition', '0', '--offset', '0'],
      ['dlq', 'list'],
      ['dlq', 'show', '1'],
      ['dlq', 'redrive', '--pipeline', 'reviews'],
      ['dlq', 'purge', '--older-than', '30d'],
      ['audit'],
      ['reconcile', '--pipeline', 'reviews'],
    ];

    // Act
    const runs: Array<{ argv: string; code: number; warnings: string[] }> = [];
    for (const argv of commands) {
      const run = await runBin(argv, env);
      runs.push({ argv: argv.join(' '), code: run.code, warnings: warningsIn(run.stderr) });
    }
    // run: the host, until it is running, then a SIGTERM
    const host = spawnHost(env, { args: ['bin/storage-consumer.js', 'run'], cwd: REPO_ROOT });
    await host.waitForLog(stateIs('Running'), 90_000);
    host.child.kill('SIGTERM');
    const exit = await host.exited;
    const hostWarnings = host.lines.map((line) => String(line.message)).filter((line) => /Warning|\[DEP\d+\]/.test(line));
    runs.push({ argv: 'run', code: exit.code ?? -1, warnings: hostWarnings });

    // Assess
    console.log(`[cli-process] ${runs.map((run) => `${run.argv}: exit ${run.code}, ${run.warnings.length} warning(s)`).join('; ')}`);
    expect(runs.filter((run) => run.warnings.length > 0)).toEqual([]);
    // They did reach their services: only the checks that must fail here fail (no host for healthcheck).
    expect(Object.fromEntries(runs.map((run) => [run.argv, run.code]))).toMatchObject({
      '--version': 0,
      migrate: 0,
      'healthcheck --pid 1': 1,
      'lag --json': 0,
      'pause network-metrics --reason process test': 0,
      'resume network-metrics': 0,
      [dryRun.join(' ')]: 0,
      'peek reviews --partition 0 --offset 0': 0,
      'dlq list': 0,
      'dlq show 1': 0,
      'dlq purge --older-than 30d': 0,
      audit: 0,
      run: 0,
    });
  });

  it(
    'dlq purge prints a delete command that runs as printed in the shell that ran it (npx storage-consumer ...)',
    { timeout: 120_000 },
    async () => {
      // Act: the preview through npx, then the printed command, word for word
      const preview = await runNpx(['dlq', 'purge', '--older-than', '30d'], env);
      const printed = /^ {2}(npx storage-consumer dlq purge .*)$/m.exec(preview.stdout)?.[1];
      const words = (printed ?? '').split(' ');
      const deleted = await runNpx(words.slice(2), env);
      const left = await stack.schema.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM dead_letter_events');

      // Assess
      console.log(`[cli-process] printed: ${printed}; it answered: ${deleted.stdout.split('\n').filter(Boolean).at(-1)}`);
      expect(preview.code).toBe(0);
      expect(printed).toMatch(/^npx storage-consumer dlq purge --before \S+Z --expect 2:[0-9a-f]{12} --yes$/);
      expect(words.slice(0, 2)).toEqual(['npx', 'storage-consumer']);
      expect(deleted.code).toBe(0);
      expect(left.rows[0]?.n).toBe('0');
    },
  );
});
