import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { booleanVariable, deepFreeze, integerVariable, listVariable, readVariable, requireVariable } from '../shared/env.js';
import type { Environment } from '../shared/env.js';
import { attemptTimeNeededMs } from '../shared/connection.js';
import { ConfigurationError } from '../shared/errors.js';
import { envSuffix } from '../shared/pipeline-spec.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loadSettings } from '../shared/settings.js';
import type { Settings } from '../shared/settings.js';

/** How the host calls a pipeline's handler. */
export const INVOKE_MODES = ['in-process', 'lambda'] as const;
export type InvokeMode = (typeof INVOKE_MODES)[number];

/**
 * SASL mechanisms accepted from the environment: kafkajs' user/password ones, and `aws-msk-iam`
 * (MSK with IAM access control: OAUTHBEARER tokens signed by AWS's signer library).
 */
export const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512', 'aws-msk-iam'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/** SASL with a user name and a password (PLAIN, SCRAM). */
export interface PasswordSasl {
  readonly mechanism: Exclude<SaslMechanism, 'aws-msk-iam'>;
  readonly username: string;
  readonly password: string;
}

/** MSK IAM: credentials from the default AWS provider chain, tokens signed for `region`. */
export interface AwsMskIamSasl {
  readonly mechanism: 'aws-msk-iam';
  readonly region: string;
}

/** The synchronous Invoke payload limit, which an event source mapping also respects. */
export const MAX_EVENT_BYTES = 6_291_456;

/** How to reach Kafka. */
export interface KafkaSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** TLS; `undefined` = plaintext. `ca` is the PEM text of `KAFKA_SSL_CA_FILE`, read at start. */
  readonly ssl: { readonly ca: string | undefined; readonly rejectUnauthorized: boolean } | undefined;
  readonly sasl: PasswordSasl | AwsMskIamSasl | undefined;
}

/** Where the handler runs. */
export interface InvokeSettings {
  readonly mode: InvokeMode;
  /** First back-off before a batch is redelivered; doubles per consecutive failure, capped. */
  readonly retryBaseMs: number;
  /** Only in `lambda` mode. */
  readonly lambda:
    | {
        /** e.g. LocalStack's `http://localhost:4566`; `undefined` = the AWS endpoint of the region. */
        readonly endpoint: string | undefined;
        readonly region: string;
        /** Function name or ARN per selected pipeline. */
        readonly functions: Readonly<Partial<Record<PipelineName, string>>>;
      }
    | undefined;
}

/** The per-pipeline liveness files (docs/design.md section 9). */
export interface HeartbeatSettings {
  readonly dir: string;
  readonly intervalMs: number;
}

/** The bounds of the progress rules (host/progress.ts, docs/operations.md "Health and metrics of the host"). */
export interface ProgressSettings {
  /** `STORAGE_FETCH_UNREADY_AFTER_MS`: no completed fetch for this long makes a pipeline not ready. */
  readonly fetchUnreadyAfterMs: number;
  /** `STORAGE_FETCH_FAIL_AFTER_MS`: no completed fetch for this long fails the pipeline (exit 1). */
  readonly fetchFailAfterMs: number;
  /** `STORAGE_STALL_AFTER_MS`: lag and no stored batch for this long is a stall. */
  readonly stallAfterMs: number;
  /** `STORAGE_LAG_INTERVAL_MS`: how often the lag is read from the broker, in the background. */
  readonly lagIntervalMs: number;
  /** `STORAGE_LAG_TIMEOUT_MS`: one lag reading gives up after this long. */
  readonly lagTimeoutMs: number;
}

/** The default heartbeat folder: the same wherever a command runs (the Dockerfile sets this path too). */
export const DEFAULT_HEARTBEAT_DIR = join(tmpdir(), 'storage-consumer', 'heartbeats');

/** The host's HTTP endpoint: `/healthz`, `/readyz`, `/metrics`. */
export interface HttpSettings {
  /** `STORAGE_HTTP_PORT`, default {@link DEFAULT_HTTP_PORT}; 0 turns the endpoint off. */
  readonly port: number;
  /** `STORAGE_HTTP_HOST`: the address to bind, default all interfaces (probes and scrapers come from outside). */
  readonly host: string;
  /**
   * `STORAGE_HTTP_CONTROL_TOKEN`: the bearer token `PUT /pipelines/{pipeline}/pause|resume`
   * require; `undefined` = control disabled (403).
   */
  readonly controlToken: string | undefined;
}

/** A control token shorter than this is refused at start: it could be guessed. */
const MIN_CONTROL_TOKEN_LENGTH = 16;

/** The HTTP endpoint's default port (prom-client's customary exporter port). */
const DEFAULT_HTTP_PORT = 9464;

/**
 * `STORAGE_HTTP_CONTROL_TOKEN`, checked without ever echoing it: a refused value is a secret
 * all the same, and the error lands in logs.
 */
function readControlToken(env: Environment): string | undefined {
  const raw = env.STORAGE_HTTP_CONTROL_TOKEN;
  if (raw === undefined || raw === '') return undefined;
  if (raw.length < MIN_CONTROL_TOKEN_LENGTH) {
    throw new ConfigurationError(
      `STORAGE_HTTP_CONTROL_TOKEN is too short (${raw.length} characters): it must have at least ${MIN_CONTROL_TOKEN_LENGTH} (e.g. ` +
        `openssl rand -hex 32)`,
    );
  }
  if (!/^[\x21-\x7e]+$/.test(raw)) {
    throw new ConfigurationError(
      'STORAGE_HTTP_CONTROL_TOKEN must be printable ASCII without spaces (it travels in an Authorization header)',
    );
  }
  return raw;
}

/** Reads the HTTP endpoint's settings alone (the health check needs them without Kafka settings). */
export function loadHttpSettings(env: Environment = process.env): HttpSettings {
  return {
    port: readVariable(env, 'STORAGE_HTTP_PORT', integerVariable(0, 65_535), DEFAULT_HTTP_PORT),
    host: readVariable(env, 'STORAGE_HTTP_HOST', z.string().trim().min(1), '0.0.0.0'),
    controlToken: readControlToken(env),
  };
}

/** Everything the host needs: its own settings plus the shared pipeline settings. Frozen. */
export interface HostSettings {
  readonly kafka: KafkaSettings;
  /** Longest wait of one fetch (kafkajs `maxWaitTimeInMs`): a stop request waits at most this long. */
  readonly pollTimeoutMs: number;
  /** Worst-case batch incl. database retries: the invocation deadline and the rebalance timeout. */
  readonly maxPollIntervalMs: number;
  readonly sessionTimeoutMs: number;
  /** Time to finish and commit in-flight batches after SIGTERM/SIGINT. */
  readonly shutdownTimeoutMs: number;
  /** The event source mapping's `ReportBatchItemFailures` switch. */
  readonly reportBatchItemFailures: boolean;
  /** Largest event (JSON bytes) the host builds; a single larger record still goes alone. */
  readonly maxEventBytes: number;
  readonly heartbeat: HeartbeatSettings;
  readonly progress: ProgressSettings;
  readonly invoke: InvokeSettings;
  /** Apply the SQL migrations before consuming (`STORAGE_MIGRATE_ON_START`). */
  readonly migrateOnStart: boolean;
  readonly http: HttpSettings;
  /** How often the host reads `pipeline_pauses` (`STORAGE_PAUSE_POLL_INTERVAL_MS`, at most 5 s). */
  readonly pausePollIntervalMs: number;
  /** The shared settings the handlers run with (pipelines, database, retry ...). */
  readonly storage: Settings;
}

const positiveMs = (min: number, max: number) => integerVariable(min, max);

/** An AWS region name such as `eu-central-1` or `us-gov-west-1`. */
const awsRegion = z
  .string()
  .trim()
  .regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region such as eu-central-1');

function readSasl(env: Environment): KafkaSettings['sasl'] {
  const mechanism = readVariable(
    env,
    'KAFKA_SASL_MECHANISM',
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(SASL_MECHANISMS, { error: 'must be plain, scram-sha-256, scram-sha-512 or aws-msk-iam' })),
    undefined as SaslMechanism | undefined,
  );
  const credentialsSet = Boolean(env.KAFKA_SASL_USERNAME || env.KAFKA_SASL_PASSWORD);
  if (mechanism === undefined) {
    if (credentialsSet) throw new ConfigurationError('KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD are set but KAFKA_SASL_MECHANISM is not');
    return undefined;
  }
  if (mechanism === 'aws-msk-iam') {
    // IAM credentials come from the default AWS provider chain; a user name here is a mistake.
    if (credentialsSet) {
      throw new ConfigurationError(
        'KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD are set but KAFKA_SASL_MECHANISM=aws-msk-iam takes its credentials from the AWS ' +
          'provider chain; unset them',
      );
    }
    const region = readVariable(
      env,
      'KAFKA_AWS_REGION',
      awsRegion,
      readVariable(env, 'AWS_REGION', awsRegion, readVariable(env, 'AWS_DEFAULT_REGION', awsRegion, '')),
    );
    if (region === '')
      throw new ConfigurationError('KAFKA_AWS_REGION is required with KAFKA_SASL_MECHANISM=aws-msk-iam (or set AWS_REGION)');
    return { mechanism, region };
  }
  return {
    mechanism,
    username: requireVariable(env, 'KAFKA_SASL_USERNAME', z.string().min(1)),
    password: requireVariable(env, 'KAFKA_SASL_PASSWORD', z.string().min(1)),
  };
}

function readKafka(env: Environment): KafkaSettings {
  const brokers = requireVariable(
    env,
    'KAFKA_BROKERS',
    listVariable.pipe(
      z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, 'each broker must be host:port')).min(1, 'must name at least one broker'),
    ),
  );
  const sasl = readSasl(env);
  const caFile = readVariable(env, 'KAFKA_SSL_CA_FILE', z.string().trim().min(1), undefined as string | undefined);
  // A CA file only makes sense with TLS, so it switches TLS on by itself; MSK IAM needs TLS too.
  const tls = readVariable(env, 'KAFKA_SSL', booleanVariable, caFile !== undefined || sasl?.mechanism === 'aws-msk-iam');
  if (caFile !== undefined && !tls) {
    throw new ConfigurationError('KAFKA_SSL_CA_FILE is set but KAFKA_SSL=false; unset one of them');
  }
  if (sasl?.mechanism === 'aws-msk-iam' && !tls) {
    throw new ConfigurationError('KAFKA_SSL=false but KAFKA_SASL_MECHANISM=aws-msk-iam needs TLS (MSK serves IAM on its TLS port 9098)');
  }
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch (error) {
      throw new ConfigurationError(`KAFKA_SSL_CA_FILE=${JSON.stringify(caFile)} cannot be read: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  const rejectUnauthorized = readVariable(env, 'KAFKA_SSL_REJECT_UNAUTHORIZED', booleanVariable, true);
  return {
    brokers,
    clientId: readVariable(env, 'KAFKA_CLIENT_ID', z.string().trim().min(1), 'storage-consumer'),
    ssl: tls ? { ca, rejectUnauthorized } : undefined,
    sasl,
  };
}

function readInvoke(env: Environment, pipelines: readonly PipelineName[]): InvokeSettings {
  const mode = readVariable(
    env,
    'STORAGE_INVOKE_MODE',
    z.enum(INVOKE_MODES, { error: 'must be in-process or lambda' }),
    'in-process' as InvokeMode,
  );
  const retryBaseMs = readVariable(env, 'STORAGE_INVOKE_RETRY_BASE_MS', positiveMs(1, 60_000), 1_000);
  if (mode !== 'lambda') return { mode, retryBaseMs, lambda: undefined };
  const region = readVariable(
    env,
    'STORAGE_LAMBDA_REGION',
    z.string().trim().min(1),
    env.AWS_REGION?.trim() || env.AWS_DEFAULT_REGION?.trim() || '',
  );
  if (region === '') {
    throw new ConfigurationError('STORAGE_LAMBDA_REGION is required with STORAGE_INVOKE_MODE=lambda (or set AWS_REGION)');
  }
  const functions = Object.fromEntries(
    pipelines.map((name) => [name, requireVariable(env, `STORAGE_LAMBDA_FUNCTION_${envSuffix(name)}`, z.string().trim().min(1))]),
  );
  return {
    mode,
    retryBaseMs,
    lambda: {
      endpoint: readVariable(env, 'STORAGE_LAMBDA_ENDPOINT', z.url({ error: 'must be a URL' }), undefined as string | undefined),
      region,
      functions,
    },
  };
}

/**
 * Reads the heartbeat settings alone: the health check needs them without Kafka settings.
 */
export function loadHeartbeatSettings(env: Environment = process.env): HeartbeatSettings & { pollTimeoutMs: number } {
  return {
    dir: readVariable(env, 'STORAGE_HEARTBEAT_DIR', z.string().trim().min(1), DEFAULT_HEARTBEAT_DIR),
    intervalMs: readVariable(env, 'STORAGE_HEARTBEAT_INTERVAL_MS', positiveMs(100, 3_600_000), 5_000),
    pollTimeoutMs: readVariable(env, 'STORAGE_POLL_TIMEOUT_MS', positiveMs(10, 60_000), 1_000),
  };
}

/** Reads the bounds of the progress rules; the failure bound must lie beyond the readiness bound. */
export function loadProgressSettings(env: Environment = process.env): ProgressSettings {
  const fetchUnreadyAfterMs = readVariable(env, 'STORAGE_FETCH_UNREADY_AFTER_MS', positiveMs(1_000, 3_600_000), 30_000);
  const fetchFailAfterMs = readVariable(env, 'STORAGE_FETCH_FAIL_AFTER_MS', positiveMs(1_000, 86_400_000), 300_000);
  if (fetchFailAfterMs <= fetchUnreadyAfterMs) {
    throw new ConfigurationError(
      `STORAGE_FETCH_FAIL_AFTER_MS=${fetchFailAfterMs} must be longer than STORAGE_FETCH_UNREADY_AFTER_MS=${fetchUnreadyAfterMs}: a ` +
        `pipeline is first not ready, then failed`,
    );
  }
  const lagIntervalMs = readVariable(env, 'STORAGE_LAG_INTERVAL_MS', positiveMs(100, 3_600_000), 15_000);
  const lagTimeoutMs = readVariable(env, 'STORAGE_LAG_TIMEOUT_MS', positiveMs(100, 600_000), 5_000);
  return {
    fetchUnreadyAfterMs,
    fetchFailAfterMs,
    stallAfterMs: readVariable(env, 'STORAGE_STALL_AFTER_MS', positiveMs(1_000, 86_400_000), 60_000),
    lagIntervalMs,
    lagTimeoutMs,
  };
}

/**
 * Reads and validates the host's settings (and the shared pipeline settings) from the
 * environment. A bad value throws a ConfigurationError naming the variable, at start-up.
 */
export function loadHostSettings(env: Environment = process.env): HostSettings {
  const storage = loadSettings(env);
  const { pollTimeoutMs, ...heartbeat } = loadHeartbeatSettings(env);
  const sessionTimeoutMs = readVariable(env, 'STORAGE_SESSION_TIMEOUT_MS', positiveMs(6_000, 1_800_000), 45_000);
  const maxPollIntervalMs = readVariable(env, 'STORAGE_MAX_POLL_INTERVAL_MS', positiveMs(1_000, 3_600_000), 300_000);
  const reportBatchItemFailures = readVariable(env, 'STORAGE_REPORT_BATCH_ITEM_FAILURES', booleanVariable, true);
  // Without the switch a reported failure counts as success: the batch would be lost (docs/design.md section 3).
  if (storage.failureResponse === 'report' && !reportBatchItemFailures) {
    throw new ConfigurationError(
      'STORAGE_FAILURE_RESPONSE=report needs STORAGE_REPORT_BATCH_ITEM_FAILURES=true: otherwise a reported failure counts as success ' +
        'and the batch is lost',
    );
  }
  const invoke = readInvoke(env, storage.selectedPipelines);
  // In-process, this interval is every batch's deadline, and the handler starts no database
  // attempt that could not finish before it: below one attempt, no batch could ever be stored.
  const attemptMs = attemptTimeNeededMs(storage.database);
  if (invoke.mode === 'in-process' && maxPollIntervalMs < attemptMs) {
    throw new ConfigurationError(
      `STORAGE_MAX_POLL_INTERVAL_MS=${maxPollIntervalMs} is the deadline of every batch, shorter than the ${attemptMs} ms one database ` +
        'attempt may need (STORAGE_DB_CONNECT_TIMEOUT_MS + STORAGE_DB_STATEMENT_TIMEOUT_MS + 2 s): no batch could ever be stored; raise ' +
        'it or lower those timeouts',
    );
  }
  const settings: HostSettings = {
    kafka: readKafka(env),
    pollTimeoutMs,
    maxPollIntervalMs,
    sessionTimeoutMs,
    shutdownTimeoutMs: readVariable(env, 'STORAGE_SHUTDOWN_TIMEOUT_MS', positiveMs(100, 3_600_000), 30_000),
    reportBatchItemFailures,
    maxEventBytes: readVariable(env, 'STORAGE_MAX_EVENT_BYTES', positiveMs(1_024, MAX_EVENT_BYTES), MAX_EVENT_BYTES),
    heartbeat,
    progress: loadProgressSettings(env),
    invoke,
    migrateOnStart: readVariable(env, 'STORAGE_MIGRATE_ON_START', booleanVariable, false),
    http: loadHttpSettings(env),
    pausePollIntervalMs: readVariable(env, 'STORAGE_PAUSE_POLL_INTERVAL_MS', positiveMs(100, 5_000), 2_000),
    storage,
  };
  return deepFreeze(settings);
}
