/**
 * The host in Invoke-API mode against serverless-offline's Lambda port (a real HTTP Invoke API
 * serving the bundled functions) with a real broker and PostgreSQL: the local stand-in for
 * "LocalStack without Kafka mappings, fed by the host".
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_APPLICATIONS } from '../../scripts/generate-events.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostProcess, PipelineNames } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { removeWorkFolder, slsEnvironment, spawnSls } from '../helpers/serverless.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `sls offline start` in a child process; resolves once its Lambda port listens. */
async function startOffline(databaseUrl: string): Promise<{ child: ChildProcess; port: number; output: string[]; env: NodeJS.ProcessEnv }> {
  const [lambdaPort, httpPort, websocketPort] = [await freePort(), await freePort(), await freePort()];
  const env = slsEnvironment({ DATABASE_URL: databaseUrl });
  const child = spawnSls(
    [
      'offline',
      'start',
      '--stage',
      'local',
      '--lambdaPort',
      String(lambdaPort),
      '--httpPort',
      String(httpPort),
      '--websocketPort',
      String(websocketPort),
    ],
    env,
  );
  const output: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serverless-offline did not start:\n${output.join('').slice(-3000)}`));
    }, 240_000);
    const take = (chunk: Buffer) => {
      output.push(chunk.toString('utf8'));
      if (output.join('').includes(`listening on http://localhost:${lambdaPort}`)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serverless-offline exited ${String(code)}:\n${output.join('').slice(-3000)}`));
    });
  });
  return { child, port: lambdaPort, output, env };
}

const review = (index: number) => ({
  review_id: `gp:offline-${index}`,
  package_name: SAMPLE_APPLICATIONS[index % SAMPLE_APPLICATIONS.length]!.package_name,
  user_name: 'Sara K.',
  content: 'Accurate forecasts, but the widget stopped updating.',
  score: 1 + (index % 5),
  thumbs_up_count: index,
  reviewed_at: '2026-11-28T19:44:02',
  last_synced_at: '2026-11-30T06:02:11.480113Z',
});
const capture = (index: number) => ({
  analysis_id: `0d8c3b2a-1e4f-4a5b-9c6d-${String(index).padStart(12, '0')}`,
  package_name: 'com.example.weather',
  captured_at: '2026-11-30T09:15:00Z',
  duration_ms: 60000,
  packet_count: 8412,
  bytes_sent: 412330,
  bytes_received: 5120987,
});

let schema: TestSchema;
let names: PipelineNames;
let offline: Awaited<ReturnType<typeof startOffline>>;
let host: HostProcess;
let admin: Admin;

beforeAll(async () => {
  schema = await createMigratedSchema([...SAMPLE_APPLICATIONS], 'offline');
  names = await createTestPipelines('offline');
  offline = await startOffline(schema.url);
  admin = testKafka('offline-test-admin').admin();
  await admin.connect();
  host = spawnHost(
    hostEnvironment({
      databaseUrl: schema.url,
      names,
      extra: {
        STORAGE_INVOKE_MODE: 'lambda',
        STORAGE_LAMBDA_ENDPOINT: `http://127.0.0.1:${offline.port}`,
        STORAGE_LAMBDA_REGION: 'us-east-1',
        STORAGE_LAMBDA_FUNCTION_APP_STATS: 'storage-consumer-local-appStats',
        STORAGE_LAMBDA_FUNCTION_REVIEWS: 'storage-consumer-local-reviews',
        STORAGE_LAMBDA_FUNCTION_NETWORK_METRICS: 'storage-consumer-local-networkMetrics',
        // serverless-offline checks no signature, but the SDK signs every request.
        AWS_ACCESS_KEY_ID: 'offline',
        AWS_SECRET_ACCESS_KEY: 'offline',
      },
    }),
  );
  await host.waitForLog(stateIs('Running'), 120_000);
}, 600_000);

afterAll(async () => {
  await killAllHosts();
  if (offline?.child.exitCode === null) {
    const exited = new Promise((resolve) => offline.child.once('exit', resolve));
    offline.child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    if (offline.child.exitCode === null) offline.child.kill('SIGKILL');
  }
  if (offline) await removeWorkFolder(offline.env);
  await admin?.disconnect();
  await schema?.drop();
}, 60_000);

describe('the host invoking the functions through serverless-offline', () => {
  it('writes the rows and commits every partition to its end once the function has stored them', async () => {
    const count = 60;
    await produce(
      names.topics.reviews,
      jsonMessages(
        Array.from({ length: count }, (_, index) => review(index)),
        { key: (index) => `gp:offline-${index}` },
      ),
    );

    const committed = await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 180_000);

    const { rows } = await schema.pool.query<{ count: string }>("SELECT count(*) FROM reviews WHERE review_id LIKE 'gp:offline-%'");
    expect(Number(rows[0]?.count)).toBe(count);
    expect([...committed.values()].reduce((sum, offset) => sum + offset, 0n)).toBe(BigInt(count));
    // The batches went through the Invoke API: serverless-offline ran the reviews function.
    expect(offline.output.join('')).toContain('(λ: reviews)');
  }, 240_000);

  it('commits nothing while the function fails, redelivers, and commits once it succeeds', async () => {
    // Without its table the function throws (42P01 is not transient): a function error.
    await schema.pool.query('ALTER TABLE network_metrics RENAME TO network_metrics_hidden');
    let restored = false;
    try {
      const failuresBefore = host.lines.filter((line) => line.message === 'batch not stored; redelivering it after a back-off').length;
      await produce(names.topics['network-metrics'], jsonMessages([capture(1), capture(2), capture(3)], { partition: 1 }));

      await waitUntil(
        'two failed invocations of network-metrics',
        async () =>
          host.lines.filter(
            (line) => line.message === 'batch not stored; redelivering it after a back-off' && line.pipeline === 'network-metrics',
          ).length >=
          failuresBefore + 2,
        120_000,
      );
      const failure = host.lines.find(
        (line) => line.message === 'batch not stored; redelivering it after a back-off' && line.pipeline === 'network-metrics',
      );
      expect(failure).toMatchObject({ outcome: 'failed', committed: [] });
      expect(offline.output.join('')).toContain('network_metrics'); // the function's own error, from the offline log
      const whileFailing = await committedOffsets(admin, names.groups['network-metrics'], names.topics['network-metrics']);
      expect([...whileFailing.values()].every((offset) => offset === -1n)).toBe(true);

      await schema.pool.query('ALTER TABLE network_metrics_hidden RENAME TO network_metrics');
      restored = true;
      const committed = await waitForCommittedToEnd(admin, names.groups['network-metrics'], names.topics['network-metrics'], 180_000);
      expect(committed.get(1)).toBe(3n);
      const { rows } = await schema.pool.query<{ count: string }>('SELECT count(*) FROM network_metrics WHERE source_partition = 1');
      expect(Number(rows[0]?.count)).toBe(3);
    } finally {
      if (!restored) await schema.pool.query('ALTER TABLE IF EXISTS network_metrics_hidden RENAME TO network_metrics');
    }
    expect(host.child.exitCode).toBeNull(); // a function error is redelivered, never fatal
  }, 300_000);
});
