import { randomBytes } from 'node:crypto';
import type { Admin } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { Registry } from 'prom-client';
import { startHttpEndpoint } from '../../host/http-endpoint.js';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { runCli } from '../helpers/cli.js';
import { SERVER_URL } from '../helpers/database.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  openHostTestStack,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleReview } from '../helpers/messages.js';

/**
 * Audit before acting (issue 26): every state-changing command refuses when its audit entry
 * cannot be written, unless --no-audit, which then says the change is unrecorded; the HTTP
 * pause/resume refuse with a JSON answer. "Cannot be written" the two ways production meets it:
 * PostgreSQL unreachable (a replay's change lives in Kafka, so it could go on), and a database
 * role that may not insert into operator_actions.
 */

const UNREACHABLE_DATABASE = 'postgres://postgres@127.0.0.1:1/storage';
const TOKEN = 'test-control-token-audit-0123456789';
const LATE = { id: 404, package_name: 'com.example.audit-late' };

let stack: HostTestStack;
let admin: Admin;
let names: PipelineNames;
/** The service's schema reached as a role that may do everything but write operator_actions. */
let noAuditUrl: string;
let role: string;
const hosts: HostHandle[] = [];

async function createRoleWithoutAudit(): Promise<string> {
  role = `sc_noaudit_${randomBytes(4).toString('hex')}`;
  const { schema } = stack.schema;
  // A password too: the embedded PostgreSQL asks for one over TCP (the machine's may trust).
  const password = randomBytes(12).toString('hex');
  await stack.schema.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  await stack.schema.pool.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
  await stack.schema.pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`);
  await stack.schema.pool.query(`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${schema} TO ${role}`);
  await stack.schema.pool.query(`REVOKE INSERT, UPDATE ON operator_actions FROM ${role}`);
  const url = new URL(stack.schema.url);
  url.username = role;
  url.password = password;
  return url.toString();
}

async function auditCount(): Promise<number> {
  const { rows } = await stack.schema.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM operator_actions');
  return Number(rows[0]?.n);
}

const sorted = (offsets: Map<number, bigint>) => [...offsets].sort(([a], [b]) => a - b).map(([, offset]) => offset.toString());

beforeAll(async () => {
  stack = await openHostTestStack('cli-audit-first');
  admin = stack.admin;
  names = await createTestPipelines('audit-first');
  noAuditUrl = await createRoleWithoutAudit();
  // Twelve reviews, consumed by the group (committed at the end); the group has no member.
  const reviews = Array.from({ length: 12 }, (_, index) => ({
    key: `a:${index}`,
    value: JSON.stringify({ ...sampleReview(), review_id: `a:${index}` }),
  }));
  await produce(names.topics.reviews, reviews);
  await commitAtEnd();
});

afterAll(async () => {
  await closeHostTestStack(stack, hosts);
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  try {
    await client.query(`DROP ROLE IF EXISTS ${role}`);
  } finally {
    await client.end();
  }
});

async function commitAtEnd(): Promise<string[]> {
  const ends = await endOffsets(admin, names.topics.reviews);
  await admin.setOffsets({
    groupId: names.groups.reviews,
    topic: names.topics.reviews,
    partitions: [...ends].map(([partition, offset]) => ({ partition, offset: offset.toString() })),
  });
  return sorted(ends);
}

function cliEnvironment(databaseUrl: string): Record<string, string> {
  return hostEnvironment({ databaseUrl, names, extra: { STORAGE_DB_RETRY_BASE_MS: '20' } });
}

describe('replay writes its audit entry before the offsets move', () => {
  it('refuses while PostgreSQL is unreachable (no offset moves); --no-audit resets and says the change is unrecorded', async () => {
    // Prepare
    const ends = await commitAtEnd();

    // Act
    const refused = await runCli(['replay', 'reviews', '--to', 'earliest'], cliEnvironment(UNREACHABLE_DATABASE));
    const afterRefusal = sorted(await committedOffsets(admin, names.groups.reviews, names.topics.reviews));
    const waived = await runCli(['replay', 'reviews', '--to', 'earliest', '--no-audit'], cliEnvironment(UNREACHABLE_DATABASE));
    console.log(`replay reviews --to earliest (PostgreSQL unreachable): exit ${refused.code}\n${refused.stdout}${refused.stderr}`);
    console.log(`replay reviews --to earliest --no-audit (PostgreSQL unreachable): exit ${waived.code}\n${waived.stdout}${waived.stderr}`);

    // Assess
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(
      /^storage-consumer replay: replay refused: the audit entry could not be written to operator_actions: connecting to PostgreSQL at <address> failed: connect ECONNREFUSED <address>; nothing was changed: no offset moved\. Every change is recorded before it is made; give --no-audit to replay without a record\n$/,
    );
    expect(afterRefusal).toEqual(ends);
    expect(waived.code).toBe(0);
    expect(waived.stderr).toMatch(
      /^storage-consumer replay: NOT RECORDED: no audit entry was written for this change \(--no-audit\): connecting to PostgreSQL at <address> failed: connect ECONNREFUSED <address>\n$/,
    );
    expect(waived.stdout).toContain('reset to earliest:');
    expect(waived.stdout).not.toContain('audit entry');
    expect(sorted(await committedOffsets(admin, names.groups.reviews, names.topics.reviews))).toEqual(['0', '0', '0']);
  });

  it('refuses when the role may not write operator_actions; with the right role the entry is written "started" first, then completed', async () => {
    // Prepare
    const ends = await commitAtEnd();
    const entriesBefore = await auditCount();

    // Act
    const refused = await runCli(['replay', 'reviews', '--to', 'earliest', '--json'], cliEnvironment(noAuditUrl));
    const unchanged = sorted(await committedOffsets(admin, names.groups.reviews, names.topics.reviews));
    const done = await runCli(['replay', 'reviews', '--to', 'earliest', '--json'], cliEnvironment(stack.schema.url));

    // Assess
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'replay refused: the audit entry could not be written to operator_actions: permission denied for table',
    );
    expect(unchanged).toEqual(ends);
    expect(done.code).toBe(0);
    const report = JSON.parse(done.stdout) as { auditId: string; replayed: boolean; unconfirmed: number[] };
    expect(report).toMatchObject({ replayed: true, unconfirmed: [] });
    const { rows } = await stack.schema.pool.query<{ state: string; time: Date; completed_at: Date; outcome: { partitions: unknown[] } }>(
      'SELECT state, time, completed_at, outcome FROM operator_actions WHERE id = $1',
      [report.auditId],
    );
    expect(await auditCount()).toBe(entriesBefore + 1);
    expect(rows[0]?.state).toBe('completed');
    // Written before the reset, completed after it.
    expect(rows[0]?.completed_at.getTime()).toBeGreaterThan(rows[0]?.time.getTime() ?? Infinity);
    expect(rows[0]?.outcome.partitions).toEqual(
      ends.map((end, partition) => ({ topic: names.topics.reviews, partition, before: end, after: '0', planned: '0', applied: true })),
    );
  });
});

describe('purge, redrive, pause and resume refuse without their audit entry', () => {
  beforeAll(async () => {
    // Three reviews that waited for their app, stored 40 days ago; the app is registered now.
    const payloads = [0, 1, 2].map((index) =>
      Buffer.from(JSON.stringify({ ...sampleReview(), review_id: `audit-first:${index}`, package_name: LATE.package_name }), 'utf8'),
    );
    await stack.schema.pool.query(
      `INSERT INTO dead_letter_events (pipeline, topic, partition, kafka_offset, payload, payload_size, payload_sha256, reason, detail, created_at)
       SELECT 'reviews', 'reviews', 0, 100 + ordinality, payload, octet_length(payload), sha256(payload), 'unknown_application',
              'no application', now() - interval '40 days'
         FROM unnest($1::bytea[]) WITH ORDINALITY AS letter(payload, ordinality)`,
      [payloads],
    );
    await stack.schema.pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [
      LATE.id,
      LATE.package_name,
    ]);
  });

  const pending = async () =>
    Number(
      (await stack.schema.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM dead_letter_events WHERE redriven_at IS NULL')).rows[0]
        ?.n,
    );

  it('dlq redrive: refused, nothing re-driven; --no-audit re-drives and says so', async () => {
    const entriesBefore = await auditCount();

    const refused = await runCli(['dlq', 'redrive'], cliEnvironment(noAuditUrl));
    const pendingAfterRefusal = await pending();
    const waived = await runCli(['dlq', 'redrive', '--no-audit'], cliEnvironment(noAuditUrl));

    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'dlq redrive refused: the audit entry could not be written to operator_actions: permission denied for table operator_actions; ' +
        'that batch of reviews was rolled back; 0 letter(s) of reviews were re-driven',
    );
    expect(pendingAfterRefusal).toBe(3);
    expect(waived.code).toBe(0);
    expect(waived.stderr).toContain('NOT RECORDED: no audit entry was written for this change (--no-audit): 1 batch(es) of reviews:');
    expect(waived.stdout).toContain('re-driven 3 of 3 selected');
    expect(await pending()).toBe(0);
    expect(await auditCount()).toBe(entriesBefore);
  });

  it('dlq purge --yes: refused, nothing deleted; --no-audit deletes and says so', async () => {
    const letters = async () =>
      Number((await stack.schema.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM dead_letter_events')).rows[0]?.n);

    const refused = await runCli(['dlq', 'purge', '--older-than', '30d', '--yes'], cliEnvironment(noAuditUrl));
    const lettersAfterRefusal = await letters();
    const waived = await runCli(['dlq', 'purge', '--older-than', '30d', '--yes', '--no-audit'], cliEnvironment(noAuditUrl));

    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'dlq purge refused: the audit entry could not be written to operator_actions: permission denied for table operator_actions; ' +
        'nothing was deleted',
    );
    expect(lettersAfterRefusal).toBe(3);
    expect(waived.code).toBe(0);
    expect(waived.stderr).toContain('storage-consumer dlq purge: NOT RECORDED');
    expect(waived.stdout).toContain('deleted 3 re-driven dead letter(s)');
    expect(waived.stdout).toContain('no audit entry written (--no-audit)');
    expect(await letters()).toBe(0);
  });

  it('pause and resume: refused, no pause row; --no-audit pauses (and resumes) and says so', async () => {
    const pauseRow = async () =>
      (await stack.schema.pool.query<{ paused: boolean }>("SELECT paused FROM pipeline_pauses WHERE pipeline = 'network-metrics'")).rows[0];

    const refused = await runCli(['pause', 'network-metrics'], cliEnvironment(noAuditUrl));
    const rowAfterRefusal = await pauseRow();
    const waived = await runCli(['pause', 'network-metrics', '--no-audit', '--json'], cliEnvironment(noAuditUrl));
    const pausedRow = await pauseRow();
    const resumeRefused = await runCli(['resume', 'network-metrics'], cliEnvironment(noAuditUrl));
    const stillPaused = await pauseRow();
    const resumed = await runCli(['resume', 'network-metrics'], cliEnvironment(stack.schema.url));

    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'pause refused: the audit entry could not be written to operator_actions: permission denied for table operator_actions; ' +
        'nothing was changed',
    );
    expect(rowAfterRefusal).toBeUndefined();
    expect(waived.code).toBe(0);
    expect(waived.stderr).toContain('storage-consumer pause: NOT RECORDED');
    expect(JSON.parse(waived.stdout)).toMatchObject({
      paused: true,
      auditId: null,
      auditUnrecorded: expect.stringContaining('permission'),
    });
    expect(pausedRow).toEqual({ paused: true });
    expect(resumeRefused.code).toBe(1);
    expect(stillPaused).toEqual({ paused: true });
    expect(resumed.code).toBe(0);
    expect(await pauseRow()).toEqual({ paused: false });
  });

  it('the HTTP pause answers 503 with a JSON error and changes nothing when its audit entry cannot be written', async () => {
    // Prepare: a host whose database role may not write operator_actions
    const [port] = await freePorts(1);
    const env = hostEnvironment({
      databaseUrl: noAuditUrl,
      names,
      heartbeatDir: stack.heartbeats.path,
      extra: {
        STORAGE_PIPELINES: 'app-stats',
        STORAGE_HTTP_PORT: String(port),
        STORAGE_HTTP_HOST: '127.0.0.1',
        STORAGE_HTTP_CONTROL_TOKEN: TOKEN,
      },
    });
    const settings = loadHostSettings(env);
    const host = startHost(settings, { logger: captureLogger() });
    hosts.push(host);
    const endpoint = await startHttpEndpoint(settings.http, new Registry(), () => host);
    hosts.push({ stop: () => endpoint.close() } as unknown as HostHandle);
    expect(await host.running).toBe(true);

    // Act
    const response = await fetch(`http://127.0.0.1:${port}/pipelines/app-stats/pause`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ reason: 'maintenance' }),
    });
    const body = (await response.json()) as Record<string, unknown>;
    console.log(`PUT /pipelines/app-stats/pause (audit not writable): ${response.status} ${JSON.stringify(body)}`);

    // Assess
    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(body).toEqual({
      error: 'the pause was refused: its audit entry could not be written to operator_actions (42501); nothing changed',
      audit: 'unavailable',
    });
    const { rows } = await stack.schema.pool.query("SELECT paused FROM pipeline_pauses WHERE pipeline = 'app-stats'");
    expect(rows).toEqual([]);
    expect(await host.stop()).toBe(0);
  });
});
