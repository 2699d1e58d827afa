/**
 * The host's settings, read from the environment through the declarations
 * (config/setting-declarations.ts): Kafka, invocation, HTTP, heartbeat, progress bounds, and the
 * consumer settings the CLI shares.
 */
import { readFileSync } from 'node:fs';
import { deepFreeze } from '../shared/env.js';
import type { Environment } from '../shared/env.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loadWith } from '../shared/setting.js';
import type { SettingsReader } from '../shared/setting.js';
import { readConsumerSettings } from './pipeline-settings.js';
import type { ConsumerSettings } from './pipeline-settings.js';
import {
  AWS_DEFAULT_REGION,
  AWS_REGION,
  CA_FILE_NEEDS_TLS,
  CREDENTIALS_NEED_PASSWORD_MECHANISM,
  FAIL_AFTER_UNREADY,
  KAFKA_AWS_REGION,
  KAFKA_BROKERS,
  KAFKA_CLIENT,
  KAFKA_CLIENT_ID,
  KAFKA_SASL_MECHANISM,
  KAFKA_SASL_PASSWORD,
  KAFKA_SASL_USERNAME,
  KAFKA_SSL,
  KAFKA_SSL_CA_FILE,
  KAFKA_SSL_REJECT_UNAUTHORIZED,
  MSK_IAM_NEEDS_TLS,
  POLL_INTERVAL_HOLDS_ATTEMPT,
  POLL_WITHIN_REBALANCE,
  POLL_WITHIN_SESSION,
  POLL_WITHIN_UNREADY,
  REPORT_NEEDS_SWITCH,
  STORAGE_FETCH_FAIL_AFTER_MS,
  STORAGE_FETCH_UNREADY_AFTER_MS,
  STORAGE_HEARTBEAT_DIR,
  STORAGE_HEARTBEAT_INTERVAL_MS,
  STORAGE_HTTP_CONTROL_TOKEN,
  STORAGE_HTTP_HOST,
  STORAGE_HTTP_PORT,
  STORAGE_INVOKE_MODE,
  STORAGE_INVOKE_RETRY_BASE_MS,
  STORAGE_LAG_INTERVAL_MS,
  STORAGE_LAG_TIMEOUT_MS,
  STORAGE_LAMBDA_ENDPOINT,
  STORAGE_LAMBDA_FUNCTION,
  STORAGE_LAMBDA_REGION,
  STORAGE_MAX_EVENT_BYTES,
  STORAGE_MAX_POLL_INTERVAL_MS,
  STORAGE_MIGRATE_ON_START,
  STORAGE_PAUSE_POLL_INTERVAL_MS,
  STORAGE_POLL_TIMEOUT_MS,
  STORAGE_REPORT_BATCH_ITEM_FAILURES,
  STORAGE_SESSION_TIMEOUT_MS,
  STORAGE_SHUTDOWN_TIMEOUT_MS,
  STORAGE_STALL_AFTER_MS,
  STOP_OUTLASTS_POLL,
} from './setting-declarations.js';
import type { InvokeMode } from './setting-declarations.js';
import type { KafkaSettings } from '../kafka/settings.js';

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

/** The host's HTTP endpoint: `/healthz`, `/readyz`, `/metrics`. */
export interface HttpSettings {
  /** `STORAGE_HTTP_PORT`, default 9464; 0 turns the endpoint off. */
  readonly port: number;
  /** `STORAGE_HTTP_HOST`: the address to bind, default all interfaces (probes and scrapers come from outside). */
  readonly host: string;
  /**
   * `STORAGE_HTTP_CONTROL_TOKEN`: the bearer token `PUT /pipelines/{pipeline}/pause|resume`
   * require; `undefined` = control disabled (403).
   */
  readonly controlToken: string | undefined;
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
  /** The shared settings the handlers run with, and the pipelines' Kafka side. */
  readonly storage: ConsumerSettings;
}

/** The AWS SDK's own region variables, the fallback of the region settings. */
function awsRegionOf(reader: SettingsReader): string | undefined {
  return reader.read(AWS_REGION, reader.read(AWS_DEFAULT_REGION), AWS_DEFAULT_REGION.name);
}

function readSasl(reader: SettingsReader): KafkaSettings['sasl'] {
  const mechanism = reader.read(KAFKA_SASL_MECHANISM);
  reader.check(CREDENTIALS_NEED_PASSWORD_MECHANISM);
  if (mechanism === undefined) return undefined;
  if (mechanism === 'aws-msk-iam') {
    const region = reader.read(KAFKA_AWS_REGION, awsRegionOf(reader), 'AWS_REGION, AWS_DEFAULT_REGION');
    if (region === undefined && !reader.refused(KAFKA_AWS_REGION.name, AWS_REGION.name, AWS_DEFAULT_REGION.name)) {
      reader.refuse([KAFKA_AWS_REGION.name], 'KAFKA_AWS_REGION is required with KAFKA_SASL_MECHANISM=aws-msk-iam (or set AWS_REGION)');
    }
    return { mechanism, region: region ?? '' };
  }
  return { mechanism, username: reader.require(KAFKA_SASL_USERNAME) ?? '', password: reader.require(KAFKA_SASL_PASSWORD) ?? '' };
}

function readKafka(reader: SettingsReader): KafkaSettings {
  const brokers = reader.require(KAFKA_BROKERS);
  const sasl = readSasl(reader);
  const caFile = reader.read(KAFKA_SSL_CA_FILE);
  // A CA file only makes sense with TLS, so it switches TLS on by itself; MSK IAM needs TLS too.
  const tls =
    caFile !== undefined || sasl?.mechanism === 'aws-msk-iam'
      ? reader.read(KAFKA_SSL, true, caFile !== undefined ? KAFKA_SSL_CA_FILE.name : KAFKA_SASL_MECHANISM.name)
      : reader.read(KAFKA_SSL);
  reader.check(CA_FILE_NEEDS_TLS);
  reader.check(MSK_IAM_NEEDS_TLS);
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch (error) {
      reader.refuse([KAFKA_SSL_CA_FILE.name], `KAFKA_SSL_CA_FILE=${JSON.stringify(caFile)} cannot be read: ${(error as Error).message}`);
    }
  }
  const rejectUnauthorized = reader.read(KAFKA_SSL_REJECT_UNAUTHORIZED);
  return {
    client: reader.read(KAFKA_CLIENT),
    brokers: brokers ?? [],
    clientId: reader.read(KAFKA_CLIENT_ID),
    ssl: tls ? { ca, rejectUnauthorized } : undefined,
    sasl,
  };
}

function readInvoke(reader: SettingsReader, pipelines: readonly PipelineName[]): InvokeSettings {
  const mode = reader.read(STORAGE_INVOKE_MODE);
  const retryBaseMs = reader.read(STORAGE_INVOKE_RETRY_BASE_MS);
  if (mode !== 'lambda') return { mode, retryBaseMs, lambda: undefined };
  const region = reader.read(STORAGE_LAMBDA_REGION, awsRegionOf(reader), 'AWS_REGION, AWS_DEFAULT_REGION');
  if (region === undefined && !reader.refused(STORAGE_LAMBDA_REGION.name, AWS_REGION.name, AWS_DEFAULT_REGION.name)) {
    reader.refuse([STORAGE_LAMBDA_REGION.name], 'STORAGE_LAMBDA_REGION is required with STORAGE_INVOKE_MODE=lambda (or set AWS_REGION)');
  }
  const functions = Object.fromEntries(pipelines.map((name) => [name, reader.require(STORAGE_LAMBDA_FUNCTION.of(name))]));
  return {
    mode,
    retryBaseMs,
    lambda: { endpoint: reader.read(STORAGE_LAMBDA_ENDPOINT), region: region ?? '', functions },
  };
}

function readHttp(reader: SettingsReader): HttpSettings {
  return {
    port: reader.read(STORAGE_HTTP_PORT),
    host: reader.read(STORAGE_HTTP_HOST),
    controlToken: reader.read(STORAGE_HTTP_CONTROL_TOKEN),
  };
}

/** Reads the HTTP endpoint's settings alone (the health check needs them without Kafka settings). */
export function loadHttpSettings(env: Environment = process.env): HttpSettings {
  return loadWith(env, readHttp);
}

function readHeartbeat(reader: SettingsReader): HeartbeatSettings & { pollTimeoutMs: number } {
  return {
    dir: reader.read(STORAGE_HEARTBEAT_DIR),
    intervalMs: reader.read(STORAGE_HEARTBEAT_INTERVAL_MS),
    pollTimeoutMs: reader.read(STORAGE_POLL_TIMEOUT_MS),
  };
}

/**
 * Reads the heartbeat settings alone: the health check needs them without Kafka settings.
 */
export function loadHeartbeatSettings(env: Environment = process.env): HeartbeatSettings & { pollTimeoutMs: number } {
  return loadWith(env, readHeartbeat);
}

function readProgress(reader: SettingsReader): ProgressSettings {
  const progress = {
    fetchUnreadyAfterMs: reader.read(STORAGE_FETCH_UNREADY_AFTER_MS),
    fetchFailAfterMs: reader.read(STORAGE_FETCH_FAIL_AFTER_MS),
    stallAfterMs: reader.read(STORAGE_STALL_AFTER_MS),
    lagIntervalMs: reader.read(STORAGE_LAG_INTERVAL_MS),
    lagTimeoutMs: reader.read(STORAGE_LAG_TIMEOUT_MS),
  };
  reader.check(FAIL_AFTER_UNREADY);
  return progress;
}

/** Reads the bounds of the progress rules; the failure bound must lie beyond the readiness bound. */
export function loadProgressSettings(env: Environment = process.env): ProgressSettings {
  return loadWith(env, readProgress);
}

/** Reads the host's settings through `reader` (which keeps every problem); unfrozen. */
export function readHostSettings(reader: SettingsReader): HostSettings {
  const storage = readConsumerSettings(reader);
  const { pollTimeoutMs, ...heartbeat } = readHeartbeat(reader);
  const sessionTimeoutMs = reader.read(STORAGE_SESSION_TIMEOUT_MS);
  const maxPollIntervalMs = reader.read(STORAGE_MAX_POLL_INTERVAL_MS);
  const reportBatchItemFailures = reader.read(STORAGE_REPORT_BATCH_ITEM_FAILURES);
  reader.check(REPORT_NEEDS_SWITCH);
  const invoke = readInvoke(reader, storage.selectedPipelines);
  reader.check(POLL_INTERVAL_HOLDS_ATTEMPT);
  const kafka = readKafka(reader);
  const shutdownTimeoutMs = reader.read(STORAGE_SHUTDOWN_TIMEOUT_MS);
  const maxEventBytes = reader.read(STORAGE_MAX_EVENT_BYTES);
  const progress = readProgress(reader);
  // The poll timeout against the group's timers, the readiness bound and the stop.
  for (const rule of [POLL_WITHIN_UNREADY, POLL_WITHIN_SESSION, POLL_WITHIN_REBALANCE, STOP_OUTLASTS_POLL]) reader.check(rule);
  return {
    kafka,
    pollTimeoutMs,
    maxPollIntervalMs,
    sessionTimeoutMs,
    shutdownTimeoutMs,
    reportBatchItemFailures,
    maxEventBytes,
    heartbeat,
    progress,
    invoke,
    migrateOnStart: reader.read(STORAGE_MIGRATE_ON_START),
    http: readHttp(reader),
    pausePollIntervalMs: reader.read(STORAGE_PAUSE_POLL_INTERVAL_MS),
    storage,
  };
}

/**
 * Reads and validates the host's settings (and the shared pipeline settings) from the
 * environment. Bad values throw one ConfigurationError naming every invalid variable, at
 * start-up.
 */
export function loadHostSettings(env: Environment = process.env): HostSettings {
  return deepFreeze(loadWith(env, readHostSettings));
}
