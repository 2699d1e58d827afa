/**
 * The dev stack and its signals (issue 40): a SIGTERM to `npm start` (what `kill <pid>`,
 * `timeout` or an IDE's stop button sends) and to `npx storage-consumer run` stops every process
 * they started: the host, the broker's JVM, PostgreSQL and its backends, the guardian processes.
 * A failed pipeline under `npm start` keeps PostgreSQL and Kafka up (the runbooks' next commands
 * reach them), says so, and holds this clone's stack against a second `npm start`.
 *
 * Each case runs in a copy of the repository in a temporary folder (its `node_modules` a link to
 * this one's), so that its processes are the only ones whose command lines name that folder
 * (`pgrep -f <copy>` finds the JVM, the postmaster and the bin), its `.data` is not a developer's,
 * and its ports are free ones. Every process the cases start is recorded as it appears (by pid
 * and start time, read from /proc) and, should a case fail, killed at the end.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { freePorts } from '../../dev/free-ports.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { createTestPipelines, hostEnvironment, temporaryDirectory, waitUntil } from '../helpers/host.js';
import { sampleNetworkMetrics } from '../helpers/messages.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** What the copy leaves out: the dependencies (linked instead), git, and every run's own state. */
const NOT_COPIED = new Set([
  'node_modules',
  '.git',
  '.data',
  '.cache',
  'dist',
  'coverage',
  '.serverless',
  '.serverless-stages',
  '.esbuild',
]);

/** A process seen in /proc: its pid and start time (in clock ticks since boot) tell it from a later one with the same pid. */
interface SeenProcess {
  readonly pid: number;
  readonly started: string;
  readonly command: string;
}

/** Fields of /proc/<pid>/stat after the command name: state, ppid, ... start time is field 22. */
function stat(pid: number): { state: string; ppid: number; started: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', ppid: Number(fields[1]), started: fields[19] ?? '' };
  } catch {
    return undefined;
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

/** Every process below `root` (not `root` itself), as /proc shows them now. */
function descendants(root: number): SeenProcess[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = stat(Number(entry));
    if (info === undefined) continue;
    children.set(info.ppid, [...(children.get(info.ppid) ?? []), Number(entry)]);
  }
  const found: SeenProcess[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    const info = stat(pid);
    if (info !== undefined) found.push({ pid, started: info.started, command: commandOf(pid) });
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** True while that very process (not a later one with its pid) exists and is not a zombie. */
function running(process: SeenProcess): boolean {
  const info = stat(process.pid);
  return info !== undefined && info.started === process.started && info.state !== 'Z';
}

/** `pgrep -f <text>`: the pids of processes whose command line contains `text` (never this test's own). */
function pgrep(text: string): number[] {
  const out = spawnSync('pgrep', ['-f', '--', text], { encoding: 'utf8' }).stdout;
  return out
    .split('\n')
    .filter((line) => line !== '')
    .map(Number)
    .filter((pid) => pid !== process.pid);
}

/** A command started by a case: its output lines, its exit, and every process seen below it. */
interface Started {
  readonly child: ChildProcess;
  readonly lines: string[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly seen: Map<string, SeenProcess>;
  waitForLine(what: string, test: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** The processes seen below it that still run. */
  left(): SeenProcess[];
}

const started: Started[] = [];
let copy: string;
let schema: TestSchema;
let heartbeats: { path: string; remove: () => Promise<void> };

/** Starts `command` in the copy with exactly `env` (plus PATH and HOME), recording its processes every 200 ms. */
function startIn(command: string, args: readonly string[], env: Record<string, string>): Started {
  const child = spawn(command, [...args], {
    cwd: copy,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', (line) => lines.push(line));
  const seen = new Map<string, SeenProcess>();
  const record = () => {
    if (child.pid === undefined) return;
    for (const found of descendants(child.pid)) seen.set(`${found.pid}/${found.started}`, found);
  };
  const watch = setInterval(record, 200);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      clearInterval(watch);
      resolve({ code, signal });
    }),
  );
  const run: Started = {
    child,
    lines,
    exited,
    seen,
    async waitForLine(what, test, timeoutMs = 240_000) {
      return waitUntil(
        what,
        async () => {
          record();
          const line = lines.find(test);
          if (line === undefined && child.exitCode !== null)
            throw new Error(`exited ${child.exitCode} before ${what}:\n${lines.join('\n')}`);
          return line;
        },
        timeoutMs,
        250,
      );
    },
    left: () => [...seen.values()].filter(running),
  };
  started.push(run);
  return run;
}

/** Signals the command's own process and waits for it to exit, then (a few seconds at most) for what it started. */
async function stop(run: Started, signal: NodeJS.Signals = 'SIGTERM') {
  run.child.kill(signal);
  const exit = await run.exited;
  await waitUntil('every process it started to end', async () => run.left().length === 0, 10_000, 200).catch(() => undefined);
  return exit;
}

/** The environment of an `npm start` in the copy: its own free ports, no DATABASE_URL, no KAFKA_BROKERS. */
async function devStackEnvironment(): Promise<Record<string, string>> {
  const [kafka, controller, postgres, http] = await freePorts(4);
  return {
    KAFKA_PORT: String(kafka),
    KAFKA_CONTROLLER_PORT: String(controller),
    EMBEDDED_PG_PORT: String(postgres),
    STORAGE_HTTP_PORT: String(http),
    // The jars this checkout already holds (or fetches once), not a second download into the copy.
    KAFKA_CACHE_DIR: join(REPO_ROOT, '.cache', 'kafka'),
  };
}

const banner = (label: string) => (line: string) => line.startsWith(`[start] ${label}`);
const valueOf = (line: string) => line.replace(/^\[start\]\s+\S+:\s+/, '').split(/\s+/)[0] ?? '';

beforeAll(async () => {
  copy = await mkdtemp(join(tmpdir(), 'dev-stack-signals-'));
  // As root, PostgreSQL runs as the user postgres, which must reach the data folder in the copy.
  await chmod(copy, 0o755);
  await cp(REPO_ROOT, copy, { recursive: true, filter: (source) => !NOT_COPIED.has(source.slice(REPO_ROOT.length).split('/')[0] ?? '') });
  await symlink(join(REPO_ROOT, 'node_modules'), join(copy, 'node_modules'));
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'devstacksignals');
  heartbeats = await temporaryDirectory('dev-stack-signals-heartbeats-');
});

afterAll(async () => {
  // A case that failed may have left its stack running: stop it as a user would, then kill what remains.
  for (const run of started) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && started.some((run) => run.left().length > 0 || run.child.exitCode === null)) await sleep(250);
  for (const run of started) {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    for (const left of run.left()) process.kill(left.pid, 'SIGKILL');
  }
  if (copy !== undefined) {
    for (const pid of pgrep(copy)) process.kill(pid, 'SIGKILL');
    await rm(copy, { recursive: true, force: true });
    // npx's link to the copy in its cache, which would point nowhere now.
    const cache = join(homedir(), '.npm', '_npx');
    for (const entry of existsSync(cache) ? readdirSync(cache) : []) {
      const manifest = join(cache, entry, 'package.json');
      if (existsSync(manifest) && readFileSync(manifest, 'utf8').includes(copy))
        await rm(join(cache, entry), { recursive: true, force: true });
    }
  }
  await schema?.drop();
  await heartbeats?.remove();
}, 120_000);

describe('npm start', () => {
  it(
    'a SIGTERM to npm start stops the host, the broker, PostgreSQL and the guardians: exit 0, nothing left',
    { timeout: 300_000 },
    async () => {
      // Prepare
      const npm = startIn('npm', ['start'], await devStackEnvironment());
      await npm.waitForLine('the banner', banner('Stop:'));
      await npm.waitForLine('the host to run', (line) => line.includes('"message":"Running"'));
      const tree = npm.left().map((seen) => seen.command);
      expect(tree.filter((command) => command.includes('kafka.Kafka') && command.includes(copy))).toHaveLength(1);
      expect(tree.filter((command) => /\/postgres -D /.test(command) && command.includes(copy))).toHaveLength(1);
      expect(tree.filter((command) => command.includes(' -e ') && command.includes('stopTimeoutMs'))).toHaveLength(2);

      // Act
      const exit = await stop(npm);

      // Assess
      expect(exit).toEqual({ code: 0, signal: null });
      expect(npm.lines).toContain('[start] stopping');
      expect(npm.left()).toEqual([]);
      expect(pgrep(copy)).toEqual([]);
      expect(existsSync(join(copy, '.data', 'npm-start.json'))).toBe(false);
    },
  );

  it(
    'a failed pipeline keeps PostgreSQL and Kafka up and says so; a second npm start is refused, naming the holder; ' +
      'a SIGTERM then stops all: exit 1, nothing left',
    { timeout: 300_000 },
    async () => {
      // Prepare: the stack up, then a column renamed by hand (the schema-drift runbook's case)
      const env = await devStackEnvironment();
      const npm = startIn('npm', ['start'], env);
      const databaseUrl = valueOf(await npm.waitForLine('the banner', banner('PostgreSQL:')));
      const brokers = valueOf(await npm.waitForLine('the banner', banner('Kafka:')));
      await npm.waitForLine('the host to run', (line) => line.includes('"message":"Running"'));
      const holder = descendants(npm.child.pid as number).find((seen) => seen.command.includes('scripts/start.ts'));
      expect(holder).toBeDefined();
      const database = new pg.Client({ connectionString: databaseUrl });
      await database.connect();
      try {
        await database.query('ALTER TABLE network_metrics RENAME COLUMN avg_rtt_ms TO avg_rtt_millis');
      } finally {
        await database.end();
      }

      // Act: a network-metrics message fails its pipeline
      const kafka = new Kafka({ clientId: 'dev-stack-signals', brokers: [brokers], logLevel: logLevel.NOTHING });
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic: 'network-metrics', messages: [{ value: JSON.stringify(sampleNetworkMetrics()) }] });
      await producer.disconnect();
      await npm.waitForLine('the host to stop on the failed pipeline', (line) => line.startsWith('[start] Stop them:'), 120_000);

      // Assess: it says what still runs, where, and how to stop it
      const said = npm.lines.filter((line) => line.startsWith('[start]')).join('\n');
      expect(said).toContain('[start] The host stopped with exit 1: a pipeline failed');
      expect(said).toContain('[start] Kafka and PostgreSQL keep running, for the failed-pipeline runbooks');
      expect(said).toContain(`[start]   PostgreSQL: ${databaseUrl}`);
      expect(said).toContain(`[start]   Kafka:      ${brokers}`);
      expect(said).toContain(`[start] Stop them:   Ctrl-C (or kill ${holder?.pid}); npm start then exits 1.`);

      // Assess: both answer, and the runbook's `verify` names the drift
      const kept = new pg.Client({ connectionString: databaseUrl });
      await kept.connect();
      try {
        expect((await kept.query('SELECT count(*)::int AS rows FROM network_metrics')).rows).toEqual([{ rows: 0 }]);
      } finally {
        await kept.end();
      }
      const admin = kafka.admin();
      await admin.connect();
      try {
        expect((await admin.fetchTopicOffsets('network-metrics')).reduce((sum, partition) => sum + Number(partition.high), 0)).toBe(1);
      } finally {
        await admin.disconnect();
      }
      let printed = '';
      const verified = await main(['verify'], {
        stdout: (text) => void (printed += text),
        stderr: (text) => void (printed += text),
        env: { DATABASE_URL: databaseUrl, KAFKA_BROKERS: brokers },
        interactive: false,
      });
      expect(verified).toBe(1);
      expect(printed).toContain('column network_metrics.avg_rtt_ms is missing though migration 0003 is recorded');

      // Assess: a second npm start in the same clone is refused, naming the first
      const second = startIn('npm', ['start'], await devStackEnvironment());
      expect((await second.exited).code).toBe(1);
      expect(second.lines.join('\n')).toContain(
        `[start] failed: another npm start holds this clone's dev stack: pid ${holder?.pid}, since `,
      );
      expect(second.lines.join('\n')).toContain(
        `after a failed pipeline; the stack is kept up (Kafka ${brokers}, PostgreSQL ${databaseUrl})`,
      );
      expect(second.left()).toEqual([]);

      // Act / Assess: the stop
      const exit = await stop(npm);
      expect(exit).toEqual({ code: 1, signal: null });
      expect(npm.left()).toEqual([]);
      expect(pgrep(copy)).toEqual([]);
      expect(existsSync(join(copy, '.data', 'npm-start.json'))).toBe(false);
    },
  );
});

describe('npx storage-consumer run', () => {
  it('a SIGTERM to npx stops the host gracefully: exit 0, nothing left', { timeout: 180_000 }, async () => {
    // Prepare
    const names = await createTestPipelines('devstack-npx');
    const npx = startIn('npx', ['storage-consumer', 'run'], {
      ...hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path }),
      STORAGE_HTTP_PORT: '0',
    });
    await npx.waitForLine('the host to run', (line) => line.includes('"message":"Running"'), 120_000);
    // npx runs the project's own bin through a link in its cache (~/.npm/_npx/<hash of the copy's path>).
    const host = npx.left().find((seen) => seen.command.endsWith('/.bin/storage-consumer run'));
    expect(
      host,
      npx
        .left()
        .map((seen) => seen.command)
        .join('\n'),
    ).toBeDefined();
    const bin = (host?.command ?? '').split(' ')[1] ?? '';
    expect(bin).toMatch(/_npx\/[0-9a-f]+\/node_modules\/\.bin\/storage-consumer$/);

    // Act
    const exit = await stop(npx);

    // Assess
    expect(exit).toEqual({ code: 0, signal: null });
    expect(npx.lines.some((line) => line.includes('"message":"stop signal received; finishing in-flight batches"'))).toBe(true);
    expect(npx.lines.some((line) => line.includes('"message":"Stopped"') && line.includes('"exitCode":0'))).toBe(true);
    expect(npx.left()).toEqual([]);
    expect(pgrep(bin)).toEqual([]);
    expect(pgrep(copy)).toEqual([]);
  });
});
