/**
 * The host processes of a chaos run, each `node --import tsx host/main.ts` spawned directly, so
 * that the pid the harness holds (and SIGKILLs) is the host's own Node process, not a wrapper.
 * The fleet acts as a supervisor with `restart: always`: a host that exits without being asked
 * to (e.g. a pipeline failed and the process stopped itself, as docs/design.md section 9 requires) is
 * started again.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { envSuffix } from '../shared/pipeline-spec.js';
import type { GroupTopic } from './kafka.js';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const HOST_ARGS = ['--import', 'tsx', 'host/main.ts'];

/** One host process (one spawn of one named host). */
interface Instance {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly logFile: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Set when the fleet itself ends the process (kill or stop): no restart on exit. */
  intended: boolean;
}

/** An exit nobody asked for. */
export interface UnexpectedExit {
  readonly name: string;
  readonly pid: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly logFile: string;
}

/**
 * Resolves once the host writing `logFile` has logged anything (its entry point, which first
 * installs its signal handlers, is running), after `timeoutMs`, or when `exited` settles.
 */
async function waitUntilLogging(logFile: string, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (!gone && Date.now() < deadline) {
    const size = await stat(logFile).then(
      (info) => info.size,
      () => 0,
    );
    if (size > 0) return;
    await sleep(50);
  }
}

/** A spawned host, as the report names it. */
export interface HostSpawn {
  readonly name: string;
  readonly pid: number;
  /** The process's own command line, from /proc: proof of what the pid is. */
  readonly commandLine: string;
}

/** Starts, kills, restarts and stops named host processes. */
export class HostFleet {
  private readonly instances = new Map<string, Instance>();
  private readonly spawnCounts = new Map<string, number>();
  private closing = false;
  readonly unexpectedExits: UnexpectedExit[] = [];

  constructor(
    private readonly env: (name: string) => Record<string, string>,
    private readonly logDir: string,
    private readonly log: (line: string) => void,
    /** Told every new pid (the run's guardian records it). */
    private readonly onSpawn: (pid: number) => Promise<void> = async () => undefined,
  ) {}

  /** Names of the hosts currently running. */
  running(): string[] {
    return [...this.instances.keys()];
  }

  /** Starts the host `name` (it must not be running). */
  async start(name: string): Promise<HostSpawn> {
    if (this.instances.has(name)) throw new Error(`host ${name} already runs`);
    const count = (this.spawnCounts.get(name) ?? 0) + 1;
    this.spawnCounts.set(name, count);
    const logFile = join(this.logDir, `host-${name}-${count}.log`);
    const fd = openSync(logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, HOST_ARGS, {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...this.env(name) },
        stdio: ['ignore', fd, fd],
      });
    } finally {
      closeSync(fd);
    }
    const pid = await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', () => resolve(child.pid as number));
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    await this.onSpawn(pid);
    const instance: Instance = { name, child, pid, logFile, exited, intended: false };
    this.instances.set(name, instance);
    void exited.then((exit) => this.onExit(instance, exit));
    if (this.closing) void this.stop(name);
    const commandLine = (await readFile(`/proc/${pid}/cmdline`).catch(() => Buffer.alloc(0)))
      .toString('utf8')
      .split('\0')
      .filter(Boolean)
      .join(' ');
    return { name, pid, commandLine };
  }

  private onExit(instance: Instance, exit: { code: number | null; signal: NodeJS.Signals | null }): void {
    if (this.instances.get(instance.name) === instance) this.instances.delete(instance.name);
    if (instance.intended || this.closing) return;
    this.unexpectedExits.push({ name: instance.name, pid: instance.pid, code: exit.code, signal: exit.signal, logFile: instance.logFile });
    this.log(
      `host ${instance.name} (pid ${instance.pid}) exited by itself (code ${String(exit.code)}, signal ${String(exit.signal)}); restarting it (see ${instance.logFile})`,
    );
    setTimeout(() => {
      if (!this.closing && !this.instances.has(instance.name))
        this.start(instance.name).catch((error: unknown) => this.log(`restart of ${instance.name} failed: ${String(error)}`));
    }, 1_000);
  }

  /** SIGKILLs the host `name`'s Node process, waits until it is gone, and starts it again. */
  async killAndRestart(name: string): Promise<{ killed: HostSpawn; restarted: HostSpawn }> {
    const instance = this.instances.get(name);
    if (instance === undefined) throw new Error(`host ${name} is not running`);
    const commandLine = (await readFile(`/proc/${instance.pid}/cmdline`).catch(() => Buffer.alloc(0)))
      .toString('utf8')
      .split('\0')
      .filter(Boolean)
      .join(' ');
    if (!commandLine.includes('host/main.ts')) throw new Error(`pid ${instance.pid} is not a host process: ${commandLine}`);
    instance.intended = true;
    instance.child.kill('SIGKILL');
    await instance.exited;
    const restarted = await this.start(name);
    return { killed: { name, pid: instance.pid, commandLine }, restarted };
  }

  /** Stops the host `name` gracefully (SIGTERM) and resolves with its exit code. */
  async stop(name: string): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const instance = this.instances.get(name);
    if (instance === undefined) throw new Error(`host ${name} is not running`);
    instance.intended = true;
    // A host restarted a moment ago may still be compiling its entry point, before any signal
    // handler exists; a SIGTERM then kills it outright (exit by signal), which is not the
    // graceful stop this asks for. Wait until it runs (it has logged).
    await waitUntilLogging(instance.logFile, instance.exited, 30_000);
    instance.child.kill('SIGTERM');
    const deadline = setTimeout(() => instance.child.kill('SIGKILL'), 60_000);
    try {
      return await instance.exited;
    } finally {
      clearTimeout(deadline);
    }
  }

  /** Stops every host (SIGTERM, SIGKILL after 60 s) and starts none again. */
  async stopAll(): Promise<Array<{ name: string; code: number | null; signal: NodeJS.Signals | null }>> {
    this.closing = true;
    return Promise.all(this.running().map(async (name) => ({ name, ...(await this.stop(name)) })));
  }
}

/** The Kafka client of the run's hosts and its reconcile: `KAFKA_CLIENT` of the chaos run's own environment, else the default. */
export function chaosKafkaClient(): Record<string, string> {
  const client = process.env.KAFKA_CLIENT?.trim();
  return client ? { KAFKA_CLIENT: client } : {};
}

/** The variables of the chaos host `name`: the run's broker and database, short timeouts, its own heartbeat folder. */
export function hostEnvironment(
  name: string,
  brokers: readonly string[],
  databaseUrl: string,
  workDir: string,
  groups: readonly GroupTopic[],
): Record<string, string> {
  const env: Record<string, string> = {
    KAFKA_BROKERS: brokers.join(','),
    KAFKA_CLIENT_ID: `chaos-host-${name}`,
    DATABASE_URL: databaseUrl,
    // Short enough that a killed member is noticed, and a dead database retried, in seconds.
    STORAGE_SESSION_TIMEOUT_MS: '6000',
    STORAGE_MAX_POLL_INTERVAL_MS: '15000',
    STORAGE_DB_RETRY_BASE_MS: '100',
    STORAGE_DB_CONNECT_TIMEOUT_MS: '2000',
    // One database attempt (connect + statement + margins, 12 s) must fit in the 15 s deadline.
    STORAGE_DB_STATEMENT_TIMEOUT_MS: '8000',
    STORAGE_INVOKE_RETRY_BASE_MS: '200',
    STORAGE_SHUTDOWN_TIMEOUT_MS: '15000',
    STORAGE_HEARTBEAT_DIR: join(workDir, `heartbeats-${name}`),
    STORAGE_HEARTBEAT_INTERVAL_MS: '1000',
    // Several hosts on one machine: no HTTP endpoint (it would want the same port).
    STORAGE_HTTP_PORT: '0',
    ...chaosKafkaClient(),
  };
  for (const { pipeline, group, topic } of groups) {
    env[`STORAGE_TOPIC_${envSuffix(pipeline)}`] = topic;
    env[`STORAGE_GROUP_${envSuffix(pipeline)}`] = group;
  }
  return env;
}
