import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  DEFAULT_HEARTBEAT_DIR,
  groupHeartbeatIntervalMs,
  MAX_EVENT_BYTES,
  STORAGE_SESSION_TIMEOUT_MS,
} from '../../../config/setting-declarations.js';
import { loadHostSettings, loadProgressSettings } from '../../../config/host-settings.js';
import { ConfigurationError } from '../../../shared/errors.js';
import { PIPELINE_NAMES } from '../../../shared/pipelines.js';

const base = { KAFKA_BROKERS: '127.0.0.1:9092' };

function errorOf(env: Record<string, string>): Error {
  try {
    loadHostSettings(env);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected loadHostSettings to throw');
}

const directories: string[] = [];
async function temporaryDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'host-unit-'));
  directories.push(directory);
  return directory;
}
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('loadHostSettings', () => {
  it('has the documented defaults', () => {
    // Act
    const settings = loadHostSettings(base);

    // Assess
    expect(settings).toMatchObject({
      kafka: { brokers: ['127.0.0.1:9092'], clientId: 'storage-consumer', ssl: undefined, sasl: undefined },
      pollTimeoutMs: 1_000,
      maxPollIntervalMs: 300_000,
      sessionTimeoutMs: 45_000,
      shutdownTimeoutMs: 30_000,
      reportBatchItemFailures: true,
      maxEventBytes: MAX_EVENT_BYTES,
      heartbeat: { dir: join(tmpdir(), 'storage-consumer', 'heartbeats'), intervalMs: 5_000 },
      progress: {
        fetchUnreadyAfterMs: 30_000,
        fetchFailAfterMs: 300_000,
        stallAfterMs: 60_000,
        lagIntervalMs: 15_000,
        lagTimeoutMs: 5_000,
      },
      invoke: { mode: 'in-process', retryBaseMs: 1_000, lambda: undefined },
      migrateOnStart: false,
    });
    expect(settings.storage.selectedPipelines).toEqual(PIPELINE_NAMES);
    expect(Object.isFrozen(settings.kafka)).toBe(true);
    // The heartbeat folder does not depend on the folder a command runs in.
    expect(DEFAULT_HEARTBEAT_DIR).toBe(join(tmpdir(), 'storage-consumer', 'heartbeats'));
  });

  it('reads the progress bounds, and refuses a failure bound that is not beyond the readiness bound', () => {
    expect(
      loadProgressSettings({ STORAGE_FETCH_UNREADY_AFTER_MS: '2000', STORAGE_FETCH_FAIL_AFTER_MS: '6000', STORAGE_STALL_AFTER_MS: '3000' }),
    ).toMatchObject({
      fetchUnreadyAfterMs: 2_000,
      fetchFailAfterMs: 6_000,
      stallAfterMs: 3_000,
    });
    expect(() => loadProgressSettings({ STORAGE_FETCH_UNREADY_AFTER_MS: '60000', STORAGE_FETCH_FAIL_AFTER_MS: '60000' })).toThrow(
      /STORAGE_FETCH_FAIL_AFTER_MS=60000 must be longer than STORAGE_FETCH_UNREADY_AFTER_MS=60000/,
    );
    expect(() => loadProgressSettings({ STORAGE_LAG_TIMEOUT_MS: 'soon' })).toThrow(/STORAGE_LAG_TIMEOUT_MS/);
  });

  it.each([
    [{ KAFKA_BROKERS: '' }, /KAFKA_BROKERS is required/],
    [{ KAFKA_BROKERS: 'localhost' }, /KAFKA_BROKERS=.*host:port/],
    [{ STORAGE_SESSION_TIMEOUT_MS: '500' }, /STORAGE_SESSION_TIMEOUT_MS/],
    [{ STORAGE_MAX_EVENT_BYTES: '7000000' }, /STORAGE_MAX_EVENT_BYTES/],
    [{ STORAGE_POLL_TIMEOUT_MS: 'soon' }, /STORAGE_POLL_TIMEOUT_MS.*whole number/],
    [{ STORAGE_REPORT_BATCH_ITEM_FAILURES: 'maybe' }, /STORAGE_REPORT_BATCH_ITEM_FAILURES/],
    [{ STORAGE_INVOKE_MODE: 'http' }, /STORAGE_INVOKE_MODE/],
    [{ STORAGE_INVOKE_RETRY_BASE_MS: '0' }, /STORAGE_INVOKE_RETRY_BASE_MS/],
    [{ KAFKA_SASL_MECHANISM: 'gssapi' }, /KAFKA_SASL_MECHANISM/],
    [{ KAFKA_CLIENT: 'rdkafka' }, /KAFKA_CLIENT=.*must be kafkajs or platformatic/],
    [{ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'u' }, /KAFKA_SASL_PASSWORD is required/],
    [{ KAFKA_SASL_USERNAME: 'u', KAFKA_SASL_PASSWORD: 'p' }, /KAFKA_SASL_MECHANISM is not/],
    [{ KAFKA_SASL_MECHANISM: 'aws-msk-iam' }, /KAFKA_AWS_REGION is required/],
    [{ KAFKA_SASL_MECHANISM: 'aws-msk-iam', KAFKA_AWS_REGION: 'Frankfurt' }, /KAFKA_AWS_REGION=.*AWS region/],
    [
      { KAFKA_SASL_MECHANISM: 'aws-msk-iam', KAFKA_AWS_REGION: 'eu-central-1', KAFKA_SSL: 'false' },
      /KAFKA_SSL=false but .*aws-msk-iam needs TLS/,
    ],
    [
      { KAFKA_SASL_MECHANISM: 'aws-msk-iam', KAFKA_AWS_REGION: 'eu-central-1', KAFKA_SASL_USERNAME: 'u' },
      /aws-msk-iam takes its credentials/,
    ],
    [{ KAFKA_SSL_CA_FILE: '/nonexistent/ca.pem' }, /KAFKA_SSL_CA_FILE.*cannot be read/],
    [{ KAFKA_SSL: 'false', KAFKA_SSL_CA_FILE: '/etc/hostname' }, /KAFKA_SSL_CA_FILE is set but KAFKA_SSL=false/],
    [{ STORAGE_FAILURE_RESPONSE: 'report', STORAGE_REPORT_BATCH_ITEM_FAILURES: 'false' }, /STORAGE_FAILURE_RESPONSE=report needs/],
    [{ STORAGE_INVOKE_MODE: 'lambda', AWS_REGION: 'eu-west-1' }, /STORAGE_LAMBDA_FUNCTION_APP_STATS is required/],
    [
      { STORAGE_INVOKE_MODE: 'lambda', STORAGE_PIPELINES: 'reviews', STORAGE_LAMBDA_FUNCTION_REVIEWS: 'f' },
      /STORAGE_LAMBDA_REGION is required/,
    ],
    [{ STORAGE_PIPELINES: 'reviews,logs' }, /STORAGE_PIPELINES/],
    [
      { STORAGE_MAX_POLL_INTERVAL_MS: '15000' },
      /STORAGE_MAX_POLL_INTERVAL_MS=15000 .* shorter than the 37000 ms .*STORAGE_DB_STATEMENT_TIMEOUT_MS/,
    ],
  ])('refuses %j with a ConfigurationError naming the variable', (env, message) => {
    // Act
    const error = errorOf({ ...base, ...env } as Record<string, string>);

    // Assess
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.message).toMatch(message);
  });

  it('reads TLS, SASL and the Lambda invoke mode', async () => {
    // Prepare
    const ca = join(await temporaryDirectory(), 'ca.pem');
    await writeFile(ca, '-----BEGIN CERTIFICATE-----\n');

    // Act
    const settings = loadHostSettings({
      KAFKA_BROKERS: 'b1:9093, b2:9093',
      KAFKA_SSL_CA_FILE: ca,
      KAFKA_SSL_REJECT_UNAUTHORIZED: 'false',
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'user',
      KAFKA_SASL_PASSWORD: 'secret',
      KAFKA_CLIENT: ' Platformatic ',
      STORAGE_PIPELINES: 'reviews',
      STORAGE_INVOKE_MODE: 'lambda',
      STORAGE_LAMBDA_ENDPOINT: 'http://localhost:4566',
      STORAGE_LAMBDA_REGION: 'eu-west-1',
      STORAGE_LAMBDA_FUNCTION_REVIEWS: 'storage-consumer-dev-reviews',
    });

    // Assess
    expect(settings.kafka).toEqual({
      client: 'platformatic',
      brokers: ['b1:9093', 'b2:9093'],
      clientId: 'storage-consumer',
      ssl: { ca: '-----BEGIN CERTIFICATE-----\n', rejectUnauthorized: false },
      sasl: { mechanism: 'scram-sha-512', username: 'user', password: 'secret' },
    });
    expect(settings.invoke.lambda).toEqual({
      endpoint: 'http://localhost:4566',
      region: 'eu-west-1',
      functions: { reviews: 'storage-consumer-dev-reviews' },
    });
  });
});

describe('the poll timeout against the group timers, the readiness bound and the stop', () => {
  // Each rule: a pair that contradicts it, and the closest pair that keeps to it (the other
  // settings generous, so that only this rule is at stake).
  interface RuleCase {
    readonly rule: string;
    readonly refused: Record<string, string>;
    readonly accepted: Record<string, string>;
    readonly message: RegExp;
  }
  const cases: readonly RuleCase[] = [
    {
      rule: 'two polls within the readiness bound',
      refused: { STORAGE_POLL_TIMEOUT_MS: '2501', STORAGE_FETCH_UNREADY_AFTER_MS: '5000' },
      accepted: { STORAGE_POLL_TIMEOUT_MS: '2500', STORAGE_FETCH_UNREADY_AFTER_MS: '5000' },
      message: /^STORAGE_POLL_TIMEOUT_MS=2501 must be at most half of STORAGE_FETCH_UNREADY_AFTER_MS=5000: .*NOT_FETCHING/,
    },
    {
      rule: 'a poll and a heartbeat interval within the session',
      refused: { STORAGE_POLL_TIMEOUT_MS: '4000', STORAGE_SESSION_TIMEOUT_MS: '6000' },
      accepted: { STORAGE_POLL_TIMEOUT_MS: '3999', STORAGE_SESSION_TIMEOUT_MS: '6000' },
      message:
        /^STORAGE_POLL_TIMEOUT_MS=4000 plus the 2000 ms heartbeat interval must be shorter than STORAGE_SESSION_TIMEOUT_MS=6000: .*no heartbeat during a fetch/,
    },
    {
      rule: 'a poll and a heartbeat interval within the session (3 s heartbeats)',
      refused: { STORAGE_POLL_TIMEOUT_MS: '42000', STORAGE_FETCH_UNREADY_AFTER_MS: '90000', STORAGE_SHUTDOWN_TIMEOUT_MS: '60000' },
      accepted: { STORAGE_POLL_TIMEOUT_MS: '41999', STORAGE_FETCH_UNREADY_AFTER_MS: '90000', STORAGE_SHUTDOWN_TIMEOUT_MS: '60000' },
      message: /^STORAGE_POLL_TIMEOUT_MS=42000 plus the 3000 ms heartbeat interval must be shorter than STORAGE_SESSION_TIMEOUT_MS=45000/,
    },
    {
      rule: 'a poll and a heartbeat interval within the rebalance timeout',
      refused: {
        STORAGE_POLL_TIMEOUT_MS: '44000',
        STORAGE_MAX_POLL_INTERVAL_MS: '37000',
        STORAGE_SESSION_TIMEOUT_MS: '60000',
        STORAGE_FETCH_UNREADY_AFTER_MS: '90000',
        STORAGE_SHUTDOWN_TIMEOUT_MS: '60000',
      },
      accepted: {
        STORAGE_POLL_TIMEOUT_MS: '43999',
        STORAGE_MAX_POLL_INTERVAL_MS: '37000',
        STORAGE_SESSION_TIMEOUT_MS: '60000',
        STORAGE_FETCH_UNREADY_AFTER_MS: '90000',
        STORAGE_SHUTDOWN_TIMEOUT_MS: '60000',
      },
      message:
        /^STORAGE_POLL_TIMEOUT_MS=44000 plus the 3000 ms heartbeat interval must be shorter than the 47000 ms rebalance timeout \(STORAGE_MAX_POLL_INTERVAL_MS=37000 \+ 10 s\)/,
    },
    {
      rule: 'a stop outlasts a poll and the leave',
      refused: { STORAGE_POLL_TIMEOUT_MS: '1000', STORAGE_SHUTDOWN_TIMEOUT_MS: '3000' },
      accepted: { STORAGE_POLL_TIMEOUT_MS: '1000', STORAGE_SHUTDOWN_TIMEOUT_MS: '3001' },
      message:
        /^STORAGE_SHUTDOWN_TIMEOUT_MS=3000 must be longer than STORAGE_POLL_TIMEOUT_MS=1000 \+ 2 s: a stop waits for the fetch in flight/,
    },
  ];

  it.each(cases)('$rule: refuses the contradicting pair naming both variables, accepts the closest pair that holds', (entry) => {
    // Act
    const error = errorOf({ ...base, ...entry.refused });
    const accepted = loadHostSettings({ ...base, ...entry.accepted });

    // Assess: the one problem is this rule's
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).problems).toEqual([expect.stringMatching(entry.message)]);
    expect(accepted.pollTimeoutMs).toBe(Number(entry.accepted['STORAGE_POLL_TIMEOUT_MS']));
  });

  it('names every broken rule at once, and skips a rule whose setting was refused on its own', () => {
    // Act: a poll of a minute breaks all four; a session timeout that is not a number breaks no rule of its own
    const all = errorOf({ ...base, STORAGE_POLL_TIMEOUT_MS: '60000', STORAGE_MAX_POLL_INTERVAL_MS: '40000' }) as ConfigurationError;
    const refused = errorOf({ ...base, STORAGE_POLL_TIMEOUT_MS: '60000', STORAGE_SESSION_TIMEOUT_MS: 'soon' }) as ConfigurationError;

    // Assess
    expect(all.problems.map((problem) => /^(STORAGE_\w+)=\d+ .*?(STORAGE_\w+)=/.exec(problem)?.slice(1))).toEqual([
      ['STORAGE_POLL_TIMEOUT_MS', 'STORAGE_FETCH_UNREADY_AFTER_MS'],
      ['STORAGE_POLL_TIMEOUT_MS', 'STORAGE_SESSION_TIMEOUT_MS'],
      ['STORAGE_POLL_TIMEOUT_MS', 'STORAGE_MAX_POLL_INTERVAL_MS'],
      ['STORAGE_SHUTDOWN_TIMEOUT_MS', 'STORAGE_POLL_TIMEOUT_MS'],
    ]);
    expect(refused.problems).toEqual([
      'STORAGE_SESSION_TIMEOUT_MS="soon" is invalid: must be a whole number',
      expect.stringMatching(/^STORAGE_POLL_TIMEOUT_MS=60000 must be at most half of STORAGE_FETCH_UNREADY_AFTER_MS=30000/),
      expect.stringMatching(/^STORAGE_SHUTDOWN_TIMEOUT_MS=30000 must be longer than STORAGE_POLL_TIMEOUT_MS=60000/),
    ]);
  });

  it('derives a heartbeat interval of at most a third of every session timeout the setting accepts', () => {
    const accepted = fc
      .integer({ min: 6_000, max: 1_800_000 })
      .filter((ms) => STORAGE_SESSION_TIMEOUT_MS.schema.safeParse(String(ms)).success);
    fc.assert(
      fc.property(accepted, (sessionMs) => {
        const heartbeatMs = groupHeartbeatIntervalMs(sessionMs);
        expect(heartbeatMs).toBeGreaterThan(0);
        expect(3 * heartbeatMs).toBeLessThanOrEqual(sessionMs);
      }),
    );
    expect([6_000, 9_000, 45_000].map(groupHeartbeatIntervalMs)).toEqual([2_000, 3_000, 3_000]);
  });
});
