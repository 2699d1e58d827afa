/**
 * A real, single-node Apache Kafka broker (KRaft, broker and controller in one JVM) on the
 * loopback interface, for development and CI. Nothing to install by hand: the jars come from
 * Maven Central (see distribution.ts) and the JVM is started directly, so the pid we hold is the
 * broker's own.
 *
 * Topics are never auto-created (`auto.create.topics.enable=false`): a missing topic must show up
 * as an error here exactly as it would against the production cluster.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { installKafkajsWorkarounds } from '../../kafka/kafkajs/index.js';
import { freePorts } from '../free-ports.js';
import { REPO_ROOT, exists, resolveKafka } from './distribution.js';
import { commandLine, isAlive, startGuardian, terminate } from './process.js';
import type { Guardian } from './process.js';

export { resolveKafka } from './distribution.js';

/** The data folder `start` and `stop` use unless told otherwise. */
export const DEFAULT_DATA_DIR = join(REPO_ROOT, '.data', 'kafka');

/** The JVM's maximum heap in MB; the development broker never gets more. */
const MAX_HEAP_MB = 512;

const PID_FILE = 'broker.pid';
const LOG_FILE = 'broker.log';
const PROPERTIES_FILE = 'server.properties';
const LOG_DIRS = 'kafka-logs';
const MAIN_CLASS = 'kafka.Kafka';

/** How to start a broker. Every field is optional. */
export interface BrokerOptions {
  /** Client (PLAINTEXT) port on 127.0.0.1; 0 or absent: a free port. */
  readonly port?: number;
  /** KRaft controller port on 127.0.0.1; 0 or absent: a free port. */
  readonly controllerPort?: number;
  /** Data folder (Kafka's logs, server.properties, broker.log, broker.pid); default `.data/kafka`. */
  readonly dataDir?: string;
  /** Run in a fresh temporary data folder that `stop` (or the guardian) deletes. Ignores `dataDir`. */
  readonly ephemeral?: boolean;
  /**
   * Leave the broker running after this process exits (the CLI's `start`); stop it later through
   * the pid file. Otherwise a guardian process stops it if this process dies without calling `stop`.
   */
  readonly detached?: boolean;
  /** Kafka version; default {@link KAFKA_VERSION}. */
  readonly version?: string;
  /** Jar cache root; default `KAFKA_CACHE_DIR` or `.cache/kafka`. */
  readonly cacheDir?: string;
  /** JVM heap limit in MB, at most {@link MAX_HEAP_MB} (the default). */
  readonly heapMb?: number;
  /** How long to wait for the broker to accept clients; default 120 s. */
  readonly startTimeoutMs?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL; default 30 s. */
  readonly stopTimeoutMs?: number;
  /** Progress lines; default: none. */
  readonly log?: (line: string) => void;
  /**
   * Broker settings over the defaults below, e.g. `{ 'group.initial.rebalance.delay.ms': '3000' }`
   * (Kafka's own default, which these brokers set to 0) for a test of what production brokers do.
   */
  readonly properties?: Readonly<Record<string, string>>;
  /**
   * SCRAM credentials written when the data folder is formatted (`kafka-storage format
   * --add-scram`), e.g. `SCRAM-SHA-256=[name=alice,password=alice-secret]`: a SASL_SCRAM listener
   * in `properties` then has its users before the first client connects.
   */
  readonly scramCredentials?: readonly string[];
}

/** A cluster to use: one this process started, or the one `KAFKA_BROKERS` names. */
export interface KafkaCluster {
  /** `host:port` bootstrap addresses, as kafkajs takes them. */
  readonly brokers: string[];
  /** False when `KAFKA_BROKERS` named an existing cluster and nothing was started. */
  readonly started: boolean;
  /** Stops the broker if this process started it (waits for the JVM to exit); else does nothing. */
  stop(): Promise<void>;
}

/** A broker this process started. */
export interface StartedBroker extends KafkaCluster {
  readonly started: true;
  readonly pid: number;
  readonly port: number;
  readonly dataDir: string;
  /** The broker's own log (stdout and stderr of the JVM). */
  readonly logFile: string;
}

/** `start` found a live broker on the same data folder (Kafka would refuse its locked log dirs). */
export class BrokerAlreadyRunningError extends Error {
  constructor(
    readonly pid: number,
    readonly brokers: string[],
    dataDir: string,
  ) {
    super(`A Kafka broker (pid ${pid}, ${brokers.join(',') || 'unknown port'}) already runs on ${dataDir}`);
    this.name = 'BrokerAlreadyRunningError';
  }
}

/** The broker list in `KAFKA_BROKERS` (comma-separated), or undefined when it is unset or empty. */
export function brokersFromEnv(env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  const brokers = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((broker) => broker.trim())
    .filter((broker) => broker !== '');
  return brokers.length > 0 ? brokers : undefined;
}

/**
 * The entry point for tests and dev scripts: when `KAFKA_BROKERS` is set, uses that cluster and
 * starts nothing; otherwise starts a broker with `options`.
 */
export async function ensureBroker(options: BrokerOptions = {}, env: NodeJS.ProcessEnv = process.env): Promise<KafkaCluster> {
  const brokers = brokersFromEnv(env);
  if (brokers !== undefined) {
    options.log?.(`KAFKA_BROKERS is set: using ${brokers.join(',')}, starting no broker`);
    return { brokers, started: false, stop: () => Promise.resolve() };
  }
  return startBroker(options);
}

/**
 * Resolves Kafka, formats the data folder on first use, starts the JVM and resolves once a
 * client can connect and describe the cluster. On failure the JVM is stopped and the error
 * carries the tail of the broker's log.
 */
export async function startBroker(options: BrokerOptions = {}): Promise<StartedBroker> {
  const heapMb = options.heapMb ?? MAX_HEAP_MB;
  if (!Number.isInteger(heapMb) || heapMb < 128 || heapMb > MAX_HEAP_MB) {
    throw new RangeError(`heapMb must be an integer in 128..${MAX_HEAP_MB}, got ${heapMb}`);
  }
  const log = options.log ?? (() => undefined);
  const distribution = await resolveKafka({ version: options.version, cacheDir: options.cacheDir, log });
  const dataDir = options.ephemeral ? await mkdtemp(join(tmpdir(), 'kafka-dev-')) : resolve(options.dataDir ?? DEFAULT_DATA_DIR);
  const propertiesFile = join(dataDir, PROPERTIES_FILE);
  const logFile = join(dataDir, LOG_FILE);
  const pidFile = join(dataDir, PID_FILE);
  const began = Date.now();

  let port: number;
  let launched: Launched;
  try {
    await mkdir(dataDir, { recursive: true });
    const running = await findBroker(dataDir);
    if (running !== undefined) throw new BrokerAlreadyRunningError(running.pid, running.brokers, dataDir);
    let controllerPort: number;
    [port, controllerPort] = await choosePorts(options.port ?? 0, options.controllerPort ?? 0);
    const extra = Object.entries(options.properties ?? {}).map(([key, value]) => `${key}=${value}\n`);
    // A key written again later in the file wins (java.util.Properties).
    await writeFile(propertiesFile, serverProperties(dataDir, port, controllerPort) + extra.join(''));
    launched = await launch(distribution.classpath, heapMb, dataDir, options.scramCredentials ?? []);
  } catch (error) {
    if (options.ephemeral) await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  const { jvm, pid, formatMs } = launched;
  const brokers = [`127.0.0.1:${port}`];
  const stopTimeoutMs = options.stopTimeoutMs ?? 30_000;
  const guardian: Guardian | undefined = options.detached
    ? undefined
    : startGuardian(pid, stopTimeoutMs, options.ephemeral ? dataDir : undefined);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await terminate(pid, stopTimeoutMs);
      guardian?.dismiss();
      await rm(pidFile, { force: true });
      if (options.ephemeral) await rm(dataDir, { recursive: true, force: true });
    })();
    return stopping;
  };

  try {
    await writeFile(pidFile, `${pid}\n`);
    await waitUntilReady(brokers, jvm, options.startTimeoutMs ?? 120_000);
  } catch (error) {
    const tail = await logTail(logFile);
    await stop();
    throw new Error(`Kafka broker on ${brokers[0]} did not start: ${(error as Error).message}\n--- ${logFile} (tail) ---\n${tail}`, {
      cause: error,
    });
  }
  const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  log(
    `Kafka ${distribution.version} broker ready at ${brokers[0]} in ${seconds(Date.now() - began)} ` +
      `(${formatMs === undefined ? '' : `storage format ${seconds(formatMs)}, `}pid ${pid}, data ${dataDir})`,
  );
  return { brokers, started: true, pid, port, dataDir, logFile, stop };
}

/**
 * Stops the broker whose pid file is in `dataDir` (one started by any process, e.g. the CLI's
 * `start`). Resolves to the pid that was stopped, or undefined when none was running there.
 */
export async function stopBroker(dataDir: string = DEFAULT_DATA_DIR, stopTimeoutMs = 30_000): Promise<number | undefined> {
  const running = await findBroker(resolve(dataDir));
  if (running !== undefined) await terminate(running.pid, stopTimeoutMs);
  await rm(join(resolve(dataDir), PID_FILE), { force: true });
  return running?.pid;
}

/**
 * The live broker recorded in `dataDir`'s pid file, if any. A pid file whose process is gone,
 * or is no longer our broker (the pid was reused), is stale and ignored.
 */
async function findBroker(dataDir: string): Promise<{ pid: number; brokers: string[] } | undefined> {
  const pid = Number.parseInt(await readFile(join(dataDir, PID_FILE), 'utf8').catch(() => ''), 10);
  if (!Number.isInteger(pid) || pid <= 0 || !(await isAlive(pid))) return undefined;
  const propertiesFile = join(dataDir, PROPERTIES_FILE);
  const args = await commandLine(pid);
  if (args !== undefined && !(args.includes(MAIN_CLASS) && args.includes(propertiesFile))) return undefined;
  const properties = await readFile(propertiesFile, 'utf8').catch(() => '');
  const listener = /^advertised\.listeners=PLAINTEXT:\/\/(\S+)$/m.exec(properties)?.[1];
  return { pid, brokers: listener === undefined ? [] : [listener] };
}

function serverProperties(dataDir: string, port: number, controllerPort: number): string {
  return `# Written by dev/kafka/broker.ts at every start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controllerPort}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=${join(dataDir, LOG_DIRS)}
# A missing topic must be an error, as in production (an auto-created topic has 1 partition).
auto.create.topics.enable=false
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
# Tests start consumers often; waiting 3 s for more members to join only slows them down.
group.initial.rebalance.delay.ms=0
# The default 128 MB compaction buffer is a quarter of the heap; __consumer_offsets is tiny here.
log.cleaner.dedupe.buffer.size=16777216
`;
}

function jvmOptions(heapMb: number, dataDir: string): string[] {
  return [
    `-Xmx${heapMb}m`,
    `-Xms${Math.min(256, heapMb)}m`,
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true',
    `-Dkafka.logs.dir=${dataDir}`,
    '-Dorg.slf4j.simpleLogger.showDateTime=true',
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
  ];
}

function java(): string {
  return process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
}

interface Launched {
  readonly jvm: ChildProcess;
  readonly pid: number;
  /** How long formatting the data folder took; undefined when it was formatted already. */
  readonly formatMs: number | undefined;
}

/** Formats the data folder on first use, then spawns the broker's JVM, logging to broker.log. */
async function launch(classpath: string, heapMb: number, dataDir: string, scramCredentials: readonly string[]): Promise<Launched> {
  const propertiesFile = join(dataDir, PROPERTIES_FILE);
  const logFile = join(dataDir, LOG_FILE);
  const logHandle = await open(logFile, 'w');
  try {
    let formatMs: number | undefined;
    if (!(await exists(join(dataDir, LOG_DIRS, 'meta.properties')))) {
      const began = Date.now();
      await formatStorage(classpath, propertiesFile, scramCredentials, logHandle.fd, logFile);
      formatMs = Date.now() - began;
    }
    const jvm = spawn(java(), [...jvmOptions(heapMb, dataDir), '-cp', classpath, MAIN_CLASS, propertiesFile], {
      detached: true,
      stdio: ['ignore', logHandle.fd, logHandle.fd],
    });
    const pid = await spawned(jvm);
    jvm.unref();
    return { jvm, pid, formatMs };
  } finally {
    await logHandle.close();
  }
}

/** `kafka-storage.sh format` without the script: a static single-voter quorum needs no --standalone. */
async function formatStorage(
  classpath: string,
  propertiesFile: string,
  scramCredentials: readonly string[],
  logFd: number,
  logFile: string,
): Promise<void> {
  const child = spawn(
    java(),
    [
      '-Xmx256m',
      '-cp',
      classpath,
      'kafka.tools.StorageTool',
      'format',
      '--ignore-formatted',
      `--cluster-id=${clusterId()}`,
      `--config=${propertiesFile}`,
      ...scramCredentials.flatMap((credential) => ['--add-scram', credential]),
    ],
    { stdio: ['ignore', logFd, logFd] },
  );
  const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
  await spawned(child);
  const code = await closed;
  if (code !== 0) {
    throw new Error(`kafka.tools.StorageTool format exited with ${String(code)}:\n${await logTail(logFile)}`);
  }
}

/** A Kafka cluster id: 16 random bytes, base64url without padding (Kafka's `Uuid` format). */
function clusterId(): string {
  return randomBytes(16).toString('base64url');
}

/** The child's pid once it runs; call it right after `spawn`, before any await, or 'spawn' is missed. */
function spawned(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('error', (error) =>
      reject(new Error(`Cannot start ${java()} (is Java 17+ installed, or JAVA_HOME set?)`, { cause: error })),
    );
    child.once('spawn', () => resolve(child.pid as number));
  });
}

/**
 * Polls until a client can connect, describe the cluster and find a group coordinator; fails at
 * once if the JVM exits.
 */
async function waitUntilReady(brokers: string[], jvm: ChildProcess, timeoutMs: number): Promise<void> {
  let exit: string | undefined;
  const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
    exit = signal === null ? `exit code ${String(code)}` : `signal ${signal}`;
  };
  jvm.once('exit', onExit);
  const deadline = Date.now() + timeoutMs;
  let lastError = 'no attempt';
  installKafkajsWorkarounds();
  try {
    for (;;) {
      if (exit !== undefined) throw new Error(`the JVM exited during start-up (${exit})`);
      const admin = new Kafka({
        clientId: 'dev-broker-probe',
        brokers,
        logLevel: logLevel.NOTHING,
        connectionTimeout: 1000,
        retry: { retries: 0 },
      }).admin();
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        if (cluster.brokers.length > 0) {
          // Finds the group coordinator, which makes the broker create __consumer_offsets now:
          // otherwise the first consumer of a test meets "coordinator not available" and crashes.
          await admin.describeGroups(['dev-broker-probe']);
          return;
        }
        lastError = 'the cluster has no registered broker yet';
      } catch (error) {
        lastError = (error as Error).message;
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
      if (Date.now() >= deadline) throw new Error(`not ready after ${timeoutMs} ms (last error: ${lastError})`);
      await sleep(250);
    }
  } finally {
    jvm.off('exit', onExit);
  }
}

/** The given ports, or distinct free loopback ports where 0 asks for one. */
async function choosePorts(port: number, controllerPort: number): Promise<[number, number]> {
  const free = await freePorts(2);
  return [port || (free[0] as number), controllerPort || (free[1] as number)];
}

async function logTail(logFile: string, lines = 40): Promise<string> {
  const text = await readFile(logFile, 'utf8').catch(() => '(no log)');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}
