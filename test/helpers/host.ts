import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Admin, Message } from 'kafkajs';
import { envSuffix } from '../../shared/pipeline-spec.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createMigratedSchema } from './database.js';
import type { TestSchema } from './database.js';
import { createTestTopics, testBrokers, testKafka } from './kafka.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One JSON log line of a host (a non-JSON line is kept as `{ message: <line> }`). */
export type HostLogLine = Record<string, unknown> & { readonly message?: string; readonly level?: string };

/** Topics and groups of one test file, so files can run side by side on one broker. */
export interface PipelineNames {
  readonly topics: Readonly<Record<PipelineName, string>>;
  readonly groups: Readonly<Record<PipelineName, string>>;
}

/**
 * Fresh topics (3 partitions each, through `createTestTopics`) and unique consumer groups per
 * pipeline, so test files, and tests within a file, can run side by side on one broker.
 */
export async function createTestPipelines(prefix: string): Promise<PipelineNames> {
  const topics = await createTestTopics(prefix);
  const unique = `${prefix}-${randomBytes(4).toString('hex')}`;
  const groups = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${unique}.${name}`])) as Record<PipelineName, string>;
  return { topics, groups };
}

/**
 * The Kafka client the run's hosts use: `KAFKA_CLIENT` of the test run's own environment (CI runs
 * the host's consumer tests again with KAFKA_CLIENT=platformatic), else the default.
 */
function testKafkaClientEnv(): Record<string, string> {
  const client = process.env.KAFKA_CLIENT?.trim();
  return client ? { KAFKA_CLIENT: client } : {};
}

/** The variables a host needs for a test: its topics and groups, short timeouts, a heartbeat dir, the run's Kafka client. */
export function hostEnvironment(options: {
  readonly databaseUrl: string;
  readonly names: PipelineNames;
  readonly heartbeatDir?: string;
  readonly extra?: Record<string, string>;
}): Record<string, string> {
  const env: Record<string, string> = {
    KAFKA_BROKERS: testBrokers().join(','),
    DATABASE_URL: options.databaseUrl,
    STORAGE_SESSION_TIMEOUT_MS: '6000',
    STORAGE_DB_RETRY_BASE_MS: '100',
    STORAGE_INVOKE_RETRY_BASE_MS: '100',
    STORAGE_SHUTDOWN_TIMEOUT_MS: '20000',
    STORAGE_HEARTBEAT_INTERVAL_MS: '500',
    // Hosts of test files run side by side: no HTTP endpoint unless a test asks for one on its own port.
    STORAGE_HTTP_PORT: '0',
    ...testKafkaClientEnv(),
  };
  if (options.heartbeatDir) env.STORAGE_HEARTBEAT_DIR = options.heartbeatDir;
  for (const name of PIPELINE_NAMES) {
    env[`STORAGE_TOPIC_${envSuffix(name)}`] = options.names.topics[name];
    env[`STORAGE_GROUP_${envSuffix(name)}`] = options.names.groups[name];
  }
  return { ...env, ...options.extra };
}

/** A host running as a child process (`node --import tsx host/main.ts`): one pid, so signals reach it. */
export interface HostProcess {
  readonly child: ChildProcess;
  readonly lines: HostLogLine[];
  /** Resolves with the first log line (already seen or coming) that matches. */
  waitForLog(predicate: (line: HostLogLine) => boolean, timeoutMs?: number): Promise<HostLogLine>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcess>();

/** How to start a host: Node's arguments and the folder; default the TypeScript sources of this repository. */
export interface HostCommand {
  readonly args: readonly string[];
  readonly cwd: string;
}

const SOURCE_HOST: HostCommand = { args: ['--import', 'tsx', 'host/main.ts'], cwd: REPO_ROOT };

/** Starts the host in a child process with exactly `env` (plus PATH and HOME). */
export function spawnHost(env: Record<string, string>, command: HostCommand = SOURCE_HOST): HostProcess {
  const child = spawn(process.execPath, [...command.args], {
    cwd: command.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const lines: HostLogLine[] = [];
  const waiters = new Set<{ predicate: (line: HostLogLine) => boolean; resolve: (line: HostLogLine) => void }>();
  const take = (text: string) => {
    let line: HostLogLine;
    try {
      line = JSON.parse(text) as HostLogLine;
    } catch {
      line = { message: text };
    }
    lines.push(line);
    for (const waiter of waiters) {
      if (waiter.predicate(line)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  };
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', take);
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', take);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  return {
    child,
    lines,
    exited,
    waitForLog(predicate, timeoutMs = 60_000) {
      const seen = lines.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { predicate, resolve };
        waiters.add(waiter);
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(
            new Error(
              `no matching host log line within ${timeoutMs} ms; last lines:\n${lines
                .slice(-15)
                .map((l) => JSON.stringify(l))
                .join('\n')}`,
            ),
          );
        }, timeoutMs);
        void exited.then(() => {
          if (!waiters.has(waiter)) return;
          waiters.delete(waiter);
          clearTimeout(timer);
          reject(
            new Error(
              `the host exited before a matching log line; last lines:\n${lines
                .slice(-15)
                .map((l) => JSON.stringify(l))
                .join('\n')}`,
            ),
          );
        });
        const resolveOnce = waiter.resolve;
        waiter.resolve = (line) => {
          clearTimeout(timer);
          resolveOnce(line);
        };
      });
    },
  };
}

/** Kills (SIGKILL) every host child process still running; for `afterAll`. */
export async function killAllHosts(): Promise<void> {
  await killChildProcesses(children);
}

/** Kills (SIGKILL) each of `processes` still running and resolves once they have all exited. */
export async function killChildProcesses(processes: Iterable<ChildProcess>): Promise<void> {
  await Promise.all(
    [...processes].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** A state line of the host's life cycle (`Running`, `Stopping`, `Failing`, `Stopped` ...). */
export const stateIs = (state: string) => (line: HostLogLine) => line.state === state && line.message === state;

/** The group's committed offset per partition (`-1n`: none yet). */
export async function committedOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, bigint>> {
  const [result] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((result?.partitions ?? []).map(({ partition, offset }) => [partition, BigInt(offset)]));
}

/** The topic's end offset per partition. */
export async function endOffsets(admin: Admin, topic: string): Promise<Map<number, bigint>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map(({ partition, high }) => [partition, BigInt(high)]));
}

/** Polls `check` until it returns a value other than `undefined`/`false`, or fails after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Waits until the group has committed every partition up to the topic's end. */
export async function waitForCommittedToEnd(
  admin: Admin,
  groupId: string,
  topic: string,
  timeoutMs = 90_000,
): Promise<Map<number, bigint>> {
  return waitUntil(
    `${groupId} to commit ${topic} to its end`,
    async () => {
      const [ends, committed] = await Promise.all([endOffsets(admin, topic), committedOffsets(admin, groupId, topic)]);
      for (const [partition, end] of ends) {
        const offset = committed.get(partition) ?? -1n;
        if (end > 0n && offset !== end) return undefined;
      }
      return committed;
    },
    timeoutMs,
  );
}

/** A temporary directory removed by the returned function. */
export async function temporaryDirectory(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** Producer messages for JSON values (objects) or raw strings; `partition` pins them all to one. */
export function jsonMessages(
  values: ReadonlyArray<unknown>,
  options: { partition?: number; key?: (index: number) => string } = {},
): Message[] {
  return values.map((value, index) => ({
    ...(options.partition === undefined ? {} : { partition: options.partition }),
    ...(options.key ? { key: options.key(index) } : {}),
    value: typeof value === 'string' ? value : JSON.stringify(value),
  }));
}

/** What a host test file works with: a migrated schema (with the weather app), a Kafka admin, a heartbeat folder. */
export interface HostTestStack {
  readonly schema: TestSchema;
  readonly admin: Admin;
  readonly heartbeats: { readonly path: string; remove(): Promise<void> };
}

/** Opens a test file's stack; `name` names the schema prefix, the admin's client id and the folder. */
export async function openHostTestStack(name: string): Promise<HostTestStack> {
  const schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], name.replaceAll('-', ''));
  const admin = testKafka(`${name}-test`).admin();
  await admin.connect();
  const heartbeats = await temporaryDirectory(`${name}-`);
  return { schema, admin, heartbeats };
}

/** Stops the file's hosts, then closes what `openHostTestStack` opened (whatever of it exists). */
export async function closeHostTestStack(stack: Partial<HostTestStack>, hosts: ReadonlyArray<{ stop(): Promise<unknown> }>): Promise<void> {
  await Promise.all(hosts.map((host) => host.stop()));
  await stack.admin?.disconnect();
  await stack.schema?.drop();
  await stack.heartbeats?.remove();
}
