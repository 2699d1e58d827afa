/**
 * The catalog of the host's and the CLI's settings: each declared once (schema, default, unit,
 * runtimes, tier, rules); the loaders read through it and docs/settings.md is generated from it.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { attemptTimeNeededMs } from '../shared/connection.js';
import { booleanVariable, bytesVariable, integerVariable, listVariable, millisecondsVariable } from '../shared/env.js';
import { envSuffix } from '../shared/pipeline-spec.js';
import { PIPELINE_NAMES, PIPELINES } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import { AREAS, setting, settingFamily, TIERS } from '../shared/setting.js';
import type { Area, CrossConstraint, Setting, SettingFamily } from '../shared/setting.js';
import {
  SHARED_SETTINGS,
  STORAGE_DB_CONNECT_TIMEOUT_MS,
  STORAGE_DB_STATEMENT_TIMEOUT_MS,
  STORAGE_FAILURE_RESPONSE,
} from '../shared/setting-declarations.js';
import { CLIENT_NAMES } from '../kafka/port.js';
import type { KafkaClientName } from '../kafka/port.js';
import { SASL_MECHANISMS } from '../kafka/settings.js';
import type { SaslMechanism } from '../kafka/settings.js';

/**
 * The settings only the host (and the CLI, which reaches the same Kafka groups) reads: the
 * pipelines' Kafka side, the broker connection, the host's timers and progress rules, its HTTP
 * endpoint and its Lambda invoke mode; with the rules between settings. The Lambda functions
 * never read these: their topic, group and batch size are their event source mapping's.
 */

/** How the host calls a pipeline's handler. */
export const INVOKE_MODES = ['in-process', 'lambda'] as const;
export type InvokeMode = (typeof INVOKE_MODES)[number];

/** The synchronous Invoke payload limit, which an event source mapping also respects. */
export const MAX_EVENT_BYTES = 6_291_456;

/** The default heartbeat folder: the same wherever a command runs (the Dockerfile sets this path too). */
export const DEFAULT_HEARTBEAT_DIR = join(tmpdir(), 'storage-consumer', 'heartbeats');

/** The largest BatchSize an event source mapping accepts. */
const MAX_BATCH_SIZE = 10_000;

/** A control token shorter than this is refused at start: it could be guessed. */
const MIN_CONTROL_TOKEN_LENGTH = 16;

const hostAndCli = ['host', 'cli'] as const;
const hostOnly = ['host'] as const;
const text = z.string().trim().min(1);
const pipelineSuffix = (pipeline: PipelineName) => envSuffix(pipeline);

/** An AWS region name such as `eu-central-1` or `us-gov-west-1`. */
const awsRegion = z
  .string()
  .trim()
  .regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region such as eu-central-1');

// Pipelines ------------------------------------------------------------------------------------

export const STORAGE_PIPELINES = setting({
  name: 'STORAGE_PIPELINES',
  schema: listVariable,
  fallback: [...PIPELINE_NAMES] as string[],
  defaultText: `all of them (${PIPELINE_NAMES.join(', ')})`,
  runtimes: hostAndCli,
  tier: 'common',
  area: 'pipelines',
  description: 'comma list of the pipelines a host process runs (and the CLI acts on by default)',
});

export const STORAGE_TOPIC = settingFamily({
  prefix: 'STORAGE_TOPIC',
  suffix: pipelineSuffix,
  schema: text,
  fallback: (pipeline: PipelineName) => PIPELINES[pipeline].topic,
  defaultText: 'the pipeline name',
  runtimes: hostAndCli,
  tier: 'common',
  area: 'pipelines',
  description: `topic per pipeline (\`<PIPELINE>\` = ${PIPELINE_NAMES.map((name) => `\`${envSuffix(name)}\``).join(', ')})`,
});

export const STORAGE_GROUP = settingFamily({
  prefix: 'STORAGE_GROUP',
  suffix: pipelineSuffix,
  schema: text,
  fallback: (pipeline: PipelineName) => PIPELINES[pipeline].group,
  defaultText: '`storage-consumer.<pipeline>`',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'pipelines',
  description: 'consumer group per pipeline, named after the pipeline whatever topic it reads',
});

const batchSizeNames =
  "one batch size, three names: the pipeline spec's `batchSize` (the default), the host's `STORAGE_MAX_POLL_RECORDS[_<PIPELINE>]` " +
  "and the Lambda event source mapping's `BatchSize` (stage parameter `batchSize<Pipeline>`)";

export const PIPELINE_MAX_POLL_RECORDS = settingFamily({
  prefix: 'STORAGE_MAX_POLL_RECORDS',
  suffix: pipelineSuffix,
  schema: integerVariable(1, MAX_BATCH_SIZE, 'records'),
  fallback: (pipeline: PipelineName) => PIPELINES[pipeline].batchSize,
  defaultText: `\`STORAGE_MAX_POLL_RECORDS\`, else the spec's (${PIPELINE_NAMES.map((name) => PIPELINES[name].batchSize).join(' / ')})`,
  unit: 'records',
  runtimes: hostAndCli,
  tier: 'common',
  area: 'pipelines',
  description: `records per batch of one pipeline (1 to ${MAX_BATCH_SIZE}; wins over \`STORAGE_MAX_POLL_RECORDS\`); ${batchSizeNames}`,
});

export const STORAGE_MAX_POLL_RECORDS = setting({
  name: 'STORAGE_MAX_POLL_RECORDS',
  schema: integerVariable(1, MAX_BATCH_SIZE, 'records'),
  fallback: undefined as number | undefined,
  defaultText: "– (each pipeline's spec)",
  unit: 'records',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'pipelines',
  description: 'batch size of every pipeline without its own `STORAGE_MAX_POLL_RECORDS_<PIPELINE>`',
});

// Kafka ----------------------------------------------------------------------------------------

export const KAFKA_BROKERS = setting({
  name: 'KAFKA_BROKERS',
  schema: listVariable.pipe(
    z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, 'each broker must be host:port')).min(1, 'must name at least one broker'),
  ),
  fallback: undefined as string[] | undefined,
  runtimes: hostAndCli,
  tier: 'common',
  area: 'kafka',
  description: 'comma list of `host:port`',
  required: 'always',
});

export const KAFKA_CLIENT = setting({
  name: 'KAFKA_CLIENT',
  schema: z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(CLIENT_NAMES, { error: 'must be kafkajs or platformatic' })),
  fallback: 'kafkajs' as KafkaClientName,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description:
    'The Kafka client library the host and the CLI run on: `kafkajs` (the default, the client every figure in docs/design.md rests on) ' +
    'or `platformatic` (`@platformatic/kafka`, maintained; background heartbeats, every codec built in). docs/design.md compares them. ' +
    'Changing it means stopping every host of a pipeline first: the two name their group protocols differently (kafkajs ' +
    '`RoundRobinAssigner`, platformatic `roundrobin`), so a host on the other client cannot join a group whose members run the first ' +
    '(Kafka refuses the join: INCONSISTENT_GROUP_PROTOCOL) and its pipeline stops',
});

export const KAFKA_CLIENT_ID = setting({
  name: 'KAFKA_CLIENT_ID',
  schema: text,
  fallback: 'storage-consumer',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: "The Kafka client id (the host's consumers add the machine's name and the process id to it)",
});

export const KAFKA_SSL = setting({
  name: 'KAFKA_SSL',
  schema: booleanVariable,
  fallback: false as boolean,
  defaultText: 'false (true with a CA file or MSK IAM)',
  runtimes: hostAndCli,
  tier: 'common',
  area: 'kafka',
  description: 'TLS to the brokers',
});

export const KAFKA_SSL_CA_FILE = setting({
  name: 'KAFKA_SSL_CA_FILE',
  schema: text,
  fallback: undefined as string | undefined,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: 'PEM CA file, read at start; turns TLS on',
});

export const KAFKA_SSL_REJECT_UNAUTHORIZED = setting({
  name: 'KAFKA_SSL_REJECT_UNAUTHORIZED',
  schema: booleanVariable,
  fallback: true,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: 'verify the broker certificate',
});

export const KAFKA_SASL_MECHANISM = setting({
  name: 'KAFKA_SASL_MECHANISM',
  schema: z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(SASL_MECHANISMS, { error: 'must be plain, scram-sha-256, scram-sha-512 or aws-msk-iam' })),
  fallback: undefined as SaslMechanism | undefined,
  runtimes: hostAndCli,
  tier: 'common',
  area: 'kafka',
  description:
    "`plain`, `scram-sha-256`, `scram-sha-512`, or `aws-msk-iam` (MSK IAM access control: OAUTHBEARER tokens from AWS's signer " +
    'library, credentials from the default AWS provider chain, TLS on)',
});

export const KAFKA_SASL_USERNAME = setting({
  name: 'KAFKA_SASL_USERNAME',
  schema: z.string().min(1),
  fallback: undefined as string | undefined,
  runtimes: hostAndCli,
  tier: 'common',
  area: 'kafka',
  description: 'SASL user name (PLAIN, SCRAM)',
  required: 'with KAFKA_SASL_MECHANISM plain or scram-*',
});

export const KAFKA_SASL_PASSWORD = setting({
  name: 'KAFKA_SASL_PASSWORD',
  schema: z.string().min(1),
  fallback: undefined as string | undefined,
  runtimes: hostAndCli,
  tier: 'common',
  area: 'kafka',
  description: 'SASL password (PLAIN, SCRAM)',
  required: 'with KAFKA_SASL_MECHANISM plain or scram-*',
  secret: 'value',
});

export const AWS_REGION = setting({
  name: 'AWS_REGION',
  schema: awsRegion,
  fallback: undefined as string | undefined,
  defaultText: '`AWS_DEFAULT_REGION`',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: "the AWS SDK's region: the fallback of `KAFKA_AWS_REGION` and `STORAGE_LAMBDA_REGION` (on Lambda, set by the platform)",
});

export const AWS_DEFAULT_REGION = setting({
  name: 'AWS_DEFAULT_REGION',
  schema: awsRegion,
  fallback: undefined as string | undefined,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: 'the fallback of `AWS_REGION`',
});

export const KAFKA_AWS_REGION = setting({
  name: 'KAFKA_AWS_REGION',
  schema: awsRegion,
  fallback: undefined as string | undefined,
  defaultText: '`AWS_REGION`, then `AWS_DEFAULT_REGION`',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'kafka',
  description: 'region of the MSK cluster; the IAM token is signed for it (`aws-msk-iam` only)',
  required: 'with KAFKA_SASL_MECHANISM=aws-msk-iam (or AWS_REGION)',
});

// The host -------------------------------------------------------------------------------------

export const STORAGE_POLL_TIMEOUT_MS = setting({
  name: 'STORAGE_POLL_TIMEOUT_MS',
  schema: millisecondsVariable(10, 60_000),
  fallback: 1_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'longest fetch wait; bounds how long a stop waits (the health check allows for it too)',
});

export const STORAGE_MAX_POLL_INTERVAL_MS = setting({
  name: 'STORAGE_MAX_POLL_INTERVAL_MS',
  schema: millisecondsVariable(1_000, 3_600_000),
  fallback: 300_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'worst-case batch incl. database retries: the invocation deadline; rebalance timeout = this + 10 s',
});

export const STORAGE_SESSION_TIMEOUT_MS = setting({
  name: 'STORAGE_SESSION_TIMEOUT_MS',
  schema: millisecondsVariable(6_000, 1_800_000),
  fallback: 45_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'consumer group session',
});

export const STORAGE_SHUTDOWN_TIMEOUT_MS = setting({
  name: 'STORAGE_SHUTDOWN_TIMEOUT_MS',
  schema: millisecondsVariable(100, 3_600_000),
  fallback: 30_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'time to finish and commit in-flight batches after SIGTERM/SIGINT; exceeded: exit 1',
});

export const STORAGE_REPORT_BATCH_ITEM_FAILURES = setting({
  name: 'STORAGE_REPORT_BATCH_ITEM_FAILURES',
  schema: booleanVariable,
  fallback: true,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description:
    "the mapping's ReportBatchItemFailures switch; off: a response without a failure report counts as success even when it is " +
    'not valid JSON, as on AWS, but a returned failure report is still honoured and an ERROR is logged',
});

export const STORAGE_MAX_EVENT_BYTES = setting({
  name: 'STORAGE_MAX_EVENT_BYTES',
  schema: bytesVariable(1_024, MAX_EVENT_BYTES),
  fallback: MAX_EVENT_BYTES,
  unit: 'bytes',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'event size cap (JSON bytes; the synchronous Invoke limit); a single larger record still goes alone',
});

export const STORAGE_HEARTBEAT_DIR = setting({
  name: 'STORAGE_HEARTBEAT_DIR',
  schema: text,
  fallback: DEFAULT_HEARTBEAT_DIR,
  defaultText: '`<os tmpdir>/storage-consumer/heartbeats` (`/tmp/...` on Linux; the same wherever a command runs)',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description:
    'heartbeat files of one host process and pipeline, `<pipeline>.<pid>.heartbeat`, written while the pipeline has not failed or ' +
    'stopped; hosts on one machine may share the folder (each checks its own files: `healthcheck --pid`)',
});

export const STORAGE_HEARTBEAT_INTERVAL_MS = setting({
  name: 'STORAGE_HEARTBEAT_INTERVAL_MS',
  schema: millisecondsVariable(100, 3_600_000),
  fallback: 5_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'host',
  description: 'heartbeat files rewritten at most this often',
});

export const STORAGE_FETCH_UNREADY_AFTER_MS = setting({
  name: 'STORAGE_FETCH_UNREADY_AFTER_MS',
  schema: millisecondsVariable(1_000, 3_600_000),
  fallback: 30_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description:
    'no completed fetch for this long (crash loop, deleted topic, lost authorization, unreachable broker): the pipeline is not ' +
    'ready, `storage_consumer_pipeline_up` 0 (docs/operations.md, "The rules behind the signals")',
});

export const STORAGE_FETCH_FAIL_AFTER_MS = setting({
  name: 'STORAGE_FETCH_FAIL_AFTER_MS',
  schema: millisecondsVariable(1_000, 86_400_000),
  fallback: 300_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: 'no completed fetch for this long: the pipeline has failed, the host exits 1',
});

export const STORAGE_STALL_AFTER_MS = setting({
  name: 'STORAGE_STALL_AFTER_MS',
  schema: millisecondsVariable(1_000, 86_400_000),
  fallback: 60_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: 'lag and no stored batch for this long: stalled (not ready, `pipeline_up` 0, a WARN at least once a minute)',
});

export const STORAGE_LAG_INTERVAL_MS = setting({
  name: 'STORAGE_LAG_INTERVAL_MS',
  schema: millisecondsVariable(100, 3_600_000),
  fallback: 15_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: "how often the host reads its groups' lag from the broker, in the background (`/metrics` answers from the last reading)",
});

export const STORAGE_LAG_TIMEOUT_MS = setting({
  name: 'STORAGE_LAG_TIMEOUT_MS',
  schema: millisecondsVariable(100, 600_000),
  fallback: 5_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: 'one lag reading gives up after this long (the next starts only once the previous one settled)',
});

export const STORAGE_MIGRATE_ON_START = setting({
  name: 'STORAGE_MIGRATE_ON_START',
  schema: booleanVariable,
  fallback: false,
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: 'apply the migrations before consuming',
});

export const STORAGE_PAUSE_POLL_INTERVAL_MS = setting({
  name: 'STORAGE_PAUSE_POLL_INTERVAL_MS',
  schema: millisecondsVariable(100, 5_000),
  fallback: 2_000,
  unit: 'ms',
  runtimes: hostOnly,
  tier: 'advanced',
  area: 'host',
  description: 'how often the host reads `pipeline_pauses` (at most 5000): a pause or resume from anywhere takes effect within it',
});

// HTTP -----------------------------------------------------------------------------------------

export const STORAGE_HTTP_PORT = setting({
  name: 'STORAGE_HTTP_PORT',
  schema: integerVariable(0, 65_535),
  fallback: 9464,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'http',
  description:
    "the host's HTTP endpoint: `/healthz`, `/readyz`, Prometheus `/metrics` (docs/operations.md); `0` turns it off; the health " +
    'check asks it',
});

export const STORAGE_HTTP_HOST = setting({
  name: 'STORAGE_HTTP_HOST',
  schema: text,
  fallback: '0.0.0.0',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'http',
  description: 'address the endpoint binds (all interfaces: probes and scrapers come from outside)',
});

export const STORAGE_HTTP_CONTROL_TOKEN = setting({
  name: 'STORAGE_HTTP_CONTROL_TOKEN',
  schema: z
    .string()
    .refine((token) => token.length >= MIN_CONTROL_TOKEN_LENGTH, {
      error: (issue) =>
        `too short (${String(issue.input).length} characters): it must have at least ${MIN_CONTROL_TOKEN_LENGTH} (e.g. openssl rand ` +
        '-hex 32)',
    })
    .refine((token) => /^[\x21-\x7e]+$/.test(token), 'must be printable ASCII without spaces (it travels in an Authorization header)'),
  fallback: undefined as string | undefined,
  defaultText: '– (control off: 403)',
  runtimes: hostAndCli,
  tier: 'common',
  area: 'http',
  description:
    'bearer token that `PUT /pipelines/{pipeline}/pause` and `/resume` require (at least 16 characters, e.g. `openssl rand -hex ' +
    '32`); reads (`GET /pipelines...`) need none',
  secret: 'value',
});

// Lambda invoke mode ---------------------------------------------------------------------------

export const STORAGE_INVOKE_MODE = setting({
  name: 'STORAGE_INVOKE_MODE',
  schema: z.enum(INVOKE_MODES, { error: 'must be in-process or lambda' }),
  fallback: 'in-process' as InvokeMode,
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'invoke',
  description: '`in-process` (the handlers in the host) or `lambda` (the Invoke API)',
});

export const STORAGE_INVOKE_RETRY_BASE_MS = setting({
  name: 'STORAGE_INVOKE_RETRY_BASE_MS',
  schema: millisecondsVariable(1, 60_000),
  fallback: 1_000,
  unit: 'ms',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'invoke',
  description:
    'redelivery back-off after a failed invocation; doubles, capped at 60 s, each wait jittered between half of that and all of it',
});

export const STORAGE_LAMBDA_ENDPOINT = setting({
  name: 'STORAGE_LAMBDA_ENDPOINT',
  schema: z.url({ error: 'must be a URL' }),
  fallback: undefined as string | undefined,
  defaultText: 'AWS',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'invoke',
  description: "Invoke API endpoint, e.g. LocalStack's `http://localhost:4566`",
});

export const STORAGE_LAMBDA_REGION = setting({
  name: 'STORAGE_LAMBDA_REGION',
  schema: text,
  fallback: undefined as string | undefined,
  defaultText: '`AWS_REGION`, then `AWS_DEFAULT_REGION`',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'invoke',
  description: 'region for the Invoke API',
  required: 'with STORAGE_INVOKE_MODE=lambda (or AWS_REGION)',
});

export const STORAGE_LAMBDA_FUNCTION = settingFamily({
  prefix: 'STORAGE_LAMBDA_FUNCTION',
  suffix: pipelineSuffix,
  schema: text,
  fallback: (): string | undefined => undefined,
  defaultText: '–',
  runtimes: hostAndCli,
  tier: 'advanced',
  area: 'invoke',
  description: 'function name or ARN per selected pipeline',
  required: 'with STORAGE_INVOKE_MODE=lambda, per selected pipeline',
});

// Rules between settings -----------------------------------------------------------------------

/** A pipeline is first not ready, then failed. */
export const FAIL_AFTER_UNREADY: CrossConstraint = {
  settings: [STORAGE_FETCH_UNREADY_AFTER_MS, STORAGE_FETCH_FAIL_AFTER_MS],
  rule: '`STORAGE_FETCH_FAIL_AFTER_MS` must be longer than `STORAGE_FETCH_UNREADY_AFTER_MS`',
  check: (value) => {
    const unready = value(STORAGE_FETCH_UNREADY_AFTER_MS);
    const fail = value(STORAGE_FETCH_FAIL_AFTER_MS);
    return fail > unready
      ? undefined
      : `STORAGE_FETCH_FAIL_AFTER_MS=${fail} must be longer than STORAGE_FETCH_UNREADY_AFTER_MS=${unready}: a pipeline is first not ` +
          'ready, then failed';
  },
};

/** Without the switch a reported failure counts as success: the batch would be lost (docs/design.md section 3). */
export const REPORT_NEEDS_SWITCH: CrossConstraint = {
  settings: [STORAGE_FAILURE_RESPONSE, STORAGE_REPORT_BATCH_ITEM_FAILURES],
  rule: '`STORAGE_FAILURE_RESPONSE=report` needs `STORAGE_REPORT_BATCH_ITEM_FAILURES=true`',
  check: (value) =>
    value(STORAGE_FAILURE_RESPONSE) === 'report' && !value(STORAGE_REPORT_BATCH_ITEM_FAILURES)
      ? 'STORAGE_FAILURE_RESPONSE=report needs STORAGE_REPORT_BATCH_ITEM_FAILURES=true: otherwise a reported failure counts as ' +
        'success and the batch is lost'
      : undefined,
};

/**
 * In-process, the poll interval is every batch's deadline, and the handler starts no database
 * attempt that could not finish before it: below one attempt, no batch could ever be stored.
 */
export const POLL_INTERVAL_HOLDS_ATTEMPT: CrossConstraint = {
  settings: [STORAGE_MAX_POLL_INTERVAL_MS, STORAGE_DB_CONNECT_TIMEOUT_MS, STORAGE_DB_STATEMENT_TIMEOUT_MS, STORAGE_INVOKE_MODE],
  rule:
    'in-process, `STORAGE_MAX_POLL_INTERVAL_MS` must hold one database attempt: `STORAGE_DB_CONNECT_TIMEOUT_MS` + ' +
    '`STORAGE_DB_STATEMENT_TIMEOUT_MS` + 2 s',
  check: (value) => {
    const interval = value(STORAGE_MAX_POLL_INTERVAL_MS);
    const attemptMs = attemptTimeNeededMs({
      connectTimeoutMs: value(STORAGE_DB_CONNECT_TIMEOUT_MS),
      statementTimeoutMs: value(STORAGE_DB_STATEMENT_TIMEOUT_MS),
    });
    if (value(STORAGE_INVOKE_MODE) !== 'in-process' || interval >= attemptMs) return undefined;
    return (
      `STORAGE_MAX_POLL_INTERVAL_MS=${interval} is the deadline of every batch, shorter than the ${attemptMs} ms one database ` +
      'attempt may need (STORAGE_DB_CONNECT_TIMEOUT_MS + STORAGE_DB_STATEMENT_TIMEOUT_MS + 2 s): no batch could ever be stored; raise ' +
      'it or lower those timeouts'
    );
  },
};

/**
 * How often a member heartbeats its group: a third of the session, at most 3 s (what
 * host/topic-consumer.ts gives kafkajs). A third leaves room for two lost heartbeats, as Kafka
 * asks; the derivation always keeps to it, so no setting can contradict it.
 */
export function groupHeartbeatIntervalMs(sessionTimeoutMs: number): number {
  return Math.min(3_000, Math.floor(sessionTimeoutMs / 3));
}

/** The group's rebalance timeout, as host/topic-consumer.ts gives it to kafkajs: the worst batch, then `REBALANCE_MARGIN_MS` (10 s). */
function rebalanceTimeoutMs(maxPollIntervalMs: number): number {
  return maxPollIntervalMs + 10_000;
}

/** What a stop allows kafkajs' LeaveGroup beyond the fetch in flight (leaveGroup in host/topic-consumer.ts). */
const LEAVE_MARGIN_MS = 2_000;

/**
 * An idle member completes a fetch once per poll timeout (the broker holds an empty fetch that
 * long); a fetch kafkajs recovers from (stale metadata, a closed connection) completes none, so
 * two polls may pass between completed fetches of a healthy host. Both must fit in the readiness
 * bound, or an idle healthy host reads NOT_FETCHING (the failure bound lies beyond it already).
 */
export const POLL_WITHIN_UNREADY: CrossConstraint = {
  settings: [STORAGE_POLL_TIMEOUT_MS, STORAGE_FETCH_UNREADY_AFTER_MS],
  rule:
    '`STORAGE_POLL_TIMEOUT_MS` must be at most half of `STORAGE_FETCH_UNREADY_AFTER_MS`: an idle host completes a fetch once per ' +
    'poll, and one fetch kafkajs recovers from completes none',
  check: (value) => {
    const poll = value(STORAGE_POLL_TIMEOUT_MS);
    const unready = value(STORAGE_FETCH_UNREADY_AFTER_MS);
    return 2 * poll <= unready
      ? undefined
      : `STORAGE_POLL_TIMEOUT_MS=${poll} must be at most half of STORAGE_FETCH_UNREADY_AFTER_MS=${unready}: an idle host completes a ` +
          'fetch once per poll (two when kafkajs recovers one), so a healthy idle host would read NOT_FETCHING; lower the poll timeout ' +
          'or raise the bound';
  },
};

/**
 * kafkajs heartbeats only between fetches: a heartbeat falls due during a fetch and goes out when
 * it returns, up to a heartbeat interval plus a poll timeout after the previous one. Past the
 * session timeout the coordinator drops the member, which then rejoins after every poll with its
 * commits refused.
 */
export const POLL_WITHIN_SESSION: CrossConstraint = {
  settings: [STORAGE_POLL_TIMEOUT_MS, STORAGE_SESSION_TIMEOUT_MS],
  rule:
    '`STORAGE_POLL_TIMEOUT_MS` plus the heartbeat interval must be shorter than `STORAGE_SESSION_TIMEOUT_MS`: kafkajs sends no ' +
    'heartbeat during a fetch (the interval, a third of the session up to 3 s, is derived and always at most a third of it)',
  check: (value) => {
    const poll = value(STORAGE_POLL_TIMEOUT_MS);
    const session = value(STORAGE_SESSION_TIMEOUT_MS);
    const heartbeat = groupHeartbeatIntervalMs(session);
    return poll + heartbeat < session
      ? undefined
      : `STORAGE_POLL_TIMEOUT_MS=${poll} plus the ${heartbeat} ms heartbeat interval must be shorter than ` +
          `STORAGE_SESSION_TIMEOUT_MS=${session}: kafkajs sends no heartbeat during a fetch, so an idle member would be dropped from ` +
          'its group during its polls and its commits refused; lower the poll timeout or raise the session timeout';
  },
};

/**
 * A member learns of a rebalance from the heartbeat after its fetch returns; the coordinator
 * waits for its JoinGroup the rebalance timeout, then completes the rebalance without it.
 */
export const POLL_WITHIN_REBALANCE: CrossConstraint = {
  settings: [STORAGE_POLL_TIMEOUT_MS, STORAGE_MAX_POLL_INTERVAL_MS, STORAGE_SESSION_TIMEOUT_MS],
  rule:
    '`STORAGE_POLL_TIMEOUT_MS` plus the heartbeat interval must be shorter than the rebalance timeout, ' +
    '`STORAGE_MAX_POLL_INTERVAL_MS` + 10 s: an idle member learns of a rebalance only when its fetch returns',
  check: (value) => {
    const poll = value(STORAGE_POLL_TIMEOUT_MS);
    const interval = value(STORAGE_MAX_POLL_INTERVAL_MS);
    const heartbeat = groupHeartbeatIntervalMs(value(STORAGE_SESSION_TIMEOUT_MS));
    const rebalance = rebalanceTimeoutMs(interval);
    return poll + heartbeat < rebalance
      ? undefined
      : `STORAGE_POLL_TIMEOUT_MS=${poll} plus the ${heartbeat} ms heartbeat interval must be shorter than the ${rebalance} ms ` +
          `rebalance timeout (STORAGE_MAX_POLL_INTERVAL_MS=${interval} + 10 s): an idle member learns of a rebalance only when its ` +
          'fetch returns, and would be left out of every rebalance; lower the poll timeout or raise the max poll interval';
  },
};

/** A stop waits for the fetch in flight, then for the LeaveGroup. */
export const STOP_OUTLASTS_POLL: CrossConstraint = {
  settings: [STORAGE_SHUTDOWN_TIMEOUT_MS, STORAGE_POLL_TIMEOUT_MS],
  rule:
    '`STORAGE_SHUTDOWN_TIMEOUT_MS` must be longer than `STORAGE_POLL_TIMEOUT_MS` + 2 s: a stop waits for the fetch in flight, then ' +
    'leaves the group',
  check: (value) => {
    const shutdown = value(STORAGE_SHUTDOWN_TIMEOUT_MS);
    const poll = value(STORAGE_POLL_TIMEOUT_MS);
    return shutdown > poll + LEAVE_MARGIN_MS
      ? undefined
      : `STORAGE_SHUTDOWN_TIMEOUT_MS=${shutdown} must be longer than STORAGE_POLL_TIMEOUT_MS=${poll} + 2 s: a stop waits for the ` +
          'fetch in flight, then leaves the group, so the stop of an idle host could time out (exit 1, no leave); raise the shutdown ' +
          'timeout or lower the poll timeout';
  },
};

/** A CA file only makes sense with TLS. */
export const CA_FILE_NEEDS_TLS: CrossConstraint = {
  settings: [KAFKA_SSL_CA_FILE, KAFKA_SSL],
  rule: '`KAFKA_SSL_CA_FILE` turns TLS on: `KAFKA_SSL=false` beside it is refused',
  check: (value) =>
    value(KAFKA_SSL_CA_FILE) !== undefined && value(KAFKA_SSL) === false
      ? 'KAFKA_SSL_CA_FILE is set but KAFKA_SSL=false; unset one of them'
      : undefined,
};

/** MSK serves IAM on its TLS port only. */
export const MSK_IAM_NEEDS_TLS: CrossConstraint = {
  settings: [KAFKA_SASL_MECHANISM, KAFKA_SSL],
  rule: '`KAFKA_SASL_MECHANISM=aws-msk-iam` turns TLS on: `KAFKA_SSL=false` beside it is refused',
  check: (value) =>
    value(KAFKA_SASL_MECHANISM) === 'aws-msk-iam' && value(KAFKA_SSL) === false
      ? 'KAFKA_SSL=false but KAFKA_SASL_MECHANISM=aws-msk-iam needs TLS (MSK serves IAM on its TLS port 9098)'
      : undefined,
};

/** SASL credentials belong to a user/password mechanism. */
export const CREDENTIALS_NEED_PASSWORD_MECHANISM: CrossConstraint = {
  settings: [KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD],
  rule:
    '`KAFKA_SASL_USERNAME`/`KAFKA_SASL_PASSWORD` need `KAFKA_SASL_MECHANISM` plain or scram-*; with `aws-msk-iam` (credentials from ' +
    'the AWS provider chain) they are refused',
  check: (value) => {
    const mechanism = value(KAFKA_SASL_MECHANISM);
    const credentialsSet = value(KAFKA_SASL_USERNAME) !== undefined || value(KAFKA_SASL_PASSWORD) !== undefined;
    if (!credentialsSet) return undefined;
    if (mechanism === undefined) return 'KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD are set but KAFKA_SASL_MECHANISM is not';
    // IAM credentials come from the default AWS provider chain; a user name here is a mistake.
    if (mechanism === 'aws-msk-iam') {
      return (
        'KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD are set but KAFKA_SASL_MECHANISM=aws-msk-iam takes its credentials from the AWS ' +
        'provider chain; unset them'
      );
    }
    return undefined;
  },
};

/** Every rule between settings, for the reference. */
export const CROSS_CONSTRAINTS: readonly CrossConstraint[] = [
  FAIL_AFTER_UNREADY,
  REPORT_NEEDS_SWITCH,
  POLL_INTERVAL_HOLDS_ATTEMPT,
  POLL_WITHIN_UNREADY,
  POLL_WITHIN_SESSION,
  POLL_WITHIN_REBALANCE,
  STOP_OUTLASTS_POLL,
  CA_FILE_NEEDS_TLS,
  MSK_IAM_NEEDS_TLS,
  CREDENTIALS_NEED_PASSWORD_MECHANISM,
];

/** The host's settings, in the reference's order within their area. */
const HOST_SETTINGS: readonly Setting[] = [
  STORAGE_PIPELINES,
  STORAGE_MAX_POLL_RECORDS,
  KAFKA_BROKERS,
  KAFKA_CLIENT,
  KAFKA_CLIENT_ID,
  KAFKA_SSL,
  KAFKA_SSL_CA_FILE,
  KAFKA_SSL_REJECT_UNAUTHORIZED,
  KAFKA_SASL_MECHANISM,
  KAFKA_SASL_USERNAME,
  KAFKA_SASL_PASSWORD,
  KAFKA_AWS_REGION,
  AWS_REGION,
  AWS_DEFAULT_REGION,
  STORAGE_POLL_TIMEOUT_MS,
  STORAGE_MAX_POLL_INTERVAL_MS,
  STORAGE_SESSION_TIMEOUT_MS,
  STORAGE_SHUTDOWN_TIMEOUT_MS,
  STORAGE_REPORT_BATCH_ITEM_FAILURES,
  STORAGE_MAX_EVENT_BYTES,
  STORAGE_HEARTBEAT_DIR,
  STORAGE_HEARTBEAT_INTERVAL_MS,
  STORAGE_FETCH_UNREADY_AFTER_MS,
  STORAGE_FETCH_FAIL_AFTER_MS,
  STORAGE_STALL_AFTER_MS,
  STORAGE_LAG_INTERVAL_MS,
  STORAGE_LAG_TIMEOUT_MS,
  STORAGE_MIGRATE_ON_START,
  STORAGE_PAUSE_POLL_INTERVAL_MS,
  STORAGE_HTTP_PORT,
  STORAGE_HTTP_HOST,
  STORAGE_HTTP_CONTROL_TOKEN,
  STORAGE_INVOKE_MODE,
  STORAGE_INVOKE_RETRY_BASE_MS,
  STORAGE_LAMBDA_ENDPOINT,
  STORAGE_LAMBDA_REGION,
];

/** The per-pipeline families, each declared once. */
export const SETTING_FAMILIES: readonly SettingFamily<unknown, PipelineName>[] = [
  STORAGE_TOPIC,
  STORAGE_GROUP,
  PIPELINE_MAX_POLL_RECORDS,
  STORAGE_LAMBDA_FUNCTION,
];

/** Every single setting of every runtime (families apart): the catalog the reference and `config` list. */
export const ALL_SETTINGS: readonly Setting[] = [...(SHARED_SETTINGS as readonly Setting[]), ...HOST_SETTINGS];

/** A single setting or a family, as the reference lists them. */
export type CatalogEntry = Setting | SettingFamily<unknown, PipelineName>;

/** Every entry in the reference's order: the common ones, then the advanced ones; each tier by area, single settings before families. */
export function catalogEntries(): CatalogEntry[] {
  const byArea = (Object.keys(AREAS) as Area[]).flatMap((area) => [
    ...ALL_SETTINGS.filter((declared) => declared.area === area),
    ...SETTING_FAMILIES.filter((family) => family.area === area),
  ]);
  return TIERS.flatMap((tier) => byArea.filter((entry) => entry.tier === tier));
}

/** Every variable in the reference's order, each family expanded into its members, one per pipeline. */
export function catalogVariables(): Setting[] {
  return catalogEntries().flatMap((entry) => ('of' in entry ? PIPELINE_NAMES.map((name) => entry.of(name)) : [entry]));
}
