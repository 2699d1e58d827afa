/**
 * Signals reach the host however it is started (issue 18): `npm run host` stopped by a
 * supervisor's SIGTERM, `bin/storage-consumer.js` on an older Node handing over to Node 24 (it
 * passes Node's flags, forwards SIGINT and SIGTERM, exits with the child's code or dies of its
 * signal), and a stop signal at the very start. The older Node is the machine's own `node`
 * (Debian's 20), when it is older than 24; otherwise those cases are skipped with a line.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  killAllHosts,
  killChildProcesses,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitUntil,
} from '../helpers/host.js';
import type { HostLogLine } from '../helpers/host.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OLD_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find((path) => {
  const version = spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  return version !== undefined && /^v\d+/.test(version) && Number(version.slice(1).split('.')[0]) < 24;
});
if (OLD_NODE === undefined)
  console.log('[host-signals] no Node older than 24 on this machine: the hand-over cases of bin/storage-consumer.js are skipped');

let schema: TestSchema;
let folder: { path: string; remove: () => Promise<void> };
const children = new Set<ChildProcess>();

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostsignals');
  folder = await temporaryDirectory('host-signals-');
  // A preload module: records each Node it runs in with that Node's flags, and can kill the Node 24 child.
  await writeFile(
    join(folder.path, 'probe.mjs'),
    [
      "import { appendFileSync } from 'node:fs';",
      'appendFileSync(process.env.PROBE_FILE, `${process.version} ${JSON.stringify(process.execArgv)}\\n`);',
      "if (process.env.PROBE_KILL && Number(process.versions.node.split('.')[0]) >= 24) process.kill(process.pid, process.env.PROBE_KILL);",
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await killAllHosts();
  await killChildProcesses(children);
  await schema?.drop();
  await folder?.remove();
});

/** Starts `command` in the repository with exactly `env` (plus PATH and HOME), collecting its JSON log lines. */
function start(command: string, args: readonly string[], env: Record<string, string>) {
  const child = spawn(command, [...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const lines: HostLogLine[] = [];
  let closed = 0;
  const streamsClosed = new Promise<void>((resolve) => {
    for (const stream of [child.stdout, child.stderr]) {
      const reader = createInterface({ input: stream as NodeJS.ReadableStream });
      reader.on('line', (text) => {
        try {
          lines.push(JSON.parse(text) as HostLogLine);
        } catch {
          lines.push({ message: text });
        }
      });
      // The pipes close only once every process that holds them (an orphaned host too) is gone.
      reader.on('close', () => {
        closed += 1;
        if (closed === 2) resolve();
      });
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, lines, exited, streamsClosed };
}

async function environment(prefix: string): Promise<Record<string, string>> {
  const names = await createTestPipelines(prefix);
  const heartbeats = await temporaryDirectory(`${prefix}-`);
  return hostEnvironment({ databaseUrl: schema.url, names, heartbeatDir: heartbeats.path });
}

const gone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
};

describe('stop signals', () => {
  it('a supervisor that signals `npm run host` stops the host: a graceful stop, exit 0, no host left behind', async () => {
    // Prepare
    const env = await environment('signals-npm');
    const npm = start('npm', ['run', '--silent', 'host'], env);
    await waitUntil('the host to run', async () => npm.lines.some(stateIs('Running')), 120_000, 250);
    const hostPid = Number(
      spawnSync('pgrep', ['-P', String(npm.child.pid)], { encoding: 'utf8' })
        .stdout.trim()
        .split('\n')[0],
    );
    expect(hostPid).toBeGreaterThan(0);

    // Act
    npm.child.kill('SIGTERM');
    await npm.exited;
    await npm.streamsClosed;

    // Assess
    expect(npm.lines.find((line) => line.message === 'stop signal received; finishing in-flight batches')).toMatchObject({
      signal: 'SIGTERM',
    });
    expect(npm.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 0 });
    expect(gone(hostPid)).toBe(true);
  });

  it.skipIf(OLD_NODE === undefined)(
    'bin/storage-consumer.js on an older Node: Node 24 gets its flags, a SIGTERM reaches the host, the exit code comes back',
    async () => {
      // Prepare
      const probe = join(folder.path, 'run.log');
      const env = { ...(await environment('signals-bin')), PROBE_FILE: probe };
      const wrapper = start(OLD_NODE as string, ['--import', join(folder.path, 'probe.mjs'), 'bin/storage-consumer.js', 'run'], env);
      await waitUntil('the host to run', async () => wrapper.lines.some(stateIs('Running')), 120_000, 250);

      // Act
      wrapper.child.kill('SIGTERM');
      const exit = await wrapper.exited;

      // Assess: the Node 24 child ran with the flag; the stop was graceful; its code came back
      const runs = (await readFile(probe, 'utf8')).trim().split('\n');
      expect(runs).toHaveLength(2);
      expect(runs[0]).toMatch(/^v(1\d|2[0-3])\./);
      expect(runs[1]).toMatch(/^v24\./);
      expect(runs[1]).toContain('"--import"');
      expect(wrapper.lines.find((line) => line.message === 'stop signal received; finishing in-flight batches')).toMatchObject({
        signal: 'SIGTERM',
      });
      expect(exit).toEqual({ code: 0, signal: null });
    },
  );

  it.skipIf(OLD_NODE === undefined)('bin/storage-consumer.js dies of the signal its Node 24 child died of', async () => {
    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      // Act: the child kills itself at once
      const wrapper = start(OLD_NODE as string, ['--import', join(folder.path, 'probe.mjs'), 'bin/storage-consumer.js', '--help'], {
        PROBE_FILE: join(folder.path, `kill-${signal}.log`),
        PROBE_KILL: signal,
      });

      // Assess: not 128, not 1: the same death
      expect(await wrapper.exited, signal).toEqual({ code: null, signal });
    }
  });

  it('a stop signal as soon as the HTTP endpoint listens (the consumers still connecting): a clean stop, exit 0', async () => {
    // Prepare / Act: the first line the host writes, then at once the signal. (The moment the
    // endpoint binds is covered in test/unit/host/run.test.ts; before any JavaScript of
    // ours runs, Node's and tsx's own start-up, a SIGTERM ends a process by default, except as
    // PID 1 in a container, where the kernel ignores it.)
    const [port] = await freePorts(1);
    const host = spawnHost({ ...(await environment('signals-early')), STORAGE_HTTP_PORT: String(port), STORAGE_HTTP_HOST: '127.0.0.1' });
    await host.waitForLog((line) => line.message === 'HTTP endpoint listening');
    host.child.kill('SIGTERM');

    // Assess
    expect((await host.exited).code).toBe(0);
    expect(host.lines.find((line) => line.message === 'stop signal received; finishing in-flight batches')).toMatchObject({
      signal: 'SIGTERM',
    });
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 0 });
  });
});
