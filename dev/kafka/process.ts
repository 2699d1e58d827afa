/**
 * Process control for the development broker's JVM: liveness, an orderly stop, and a guardian
 * that stops the JVM when the Node process that started it dies without stopping it.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const POLL_MS = 100;

/**
 * True while `pid` is a running process. A zombie (exited, not yet reaped by its parent) counts
 * as dead: `kill(pid, 0)` alone would report it alive until the parent reaps it.
 */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // Field 3, after the parenthesised command name (which may itself contain spaces).
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** The process's command line, or undefined where `/proc` does not tell (not Linux, or gone). */
export async function commandLine(pid: number): Promise<string[] | undefined> {
  const raw = await readFile(`/proc/${pid}/cmdline`).catch(() => undefined);
  return raw
    ?.toString('utf8')
    .split('\0')
    .filter((part) => part !== '');
}

/** Resolves true once `pid` has exited, false when `timeoutMs` passed first. */
export async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (await isAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
  return true;
}

/**
 * Stops `pid`: SIGTERM (the JVM runs Kafka's shutdown hook: controlled shutdown, logs flushed),
 * then SIGKILL when it is still alive after `timeoutMs`. Resolves once the process is gone and
 * says whether it had to be killed.
 */
export async function terminate(pid: number, timeoutMs: number): Promise<'terminated' | 'killed'> {
  signal(pid, 'SIGTERM');
  if (await waitForExit(pid, timeoutMs)) return 'terminated';
  signal(pid, 'SIGKILL');
  await waitForExit(pid, 10_000);
  return 'killed';
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** A running guardian; `dismiss` ends it without touching the JVM (after an orderly stop). */
export interface Guardian {
  readonly pid: number | undefined;
  dismiss(): void;
}

/**
 * Starts a tiny detached Node process that stops `targetPid` (`stopSignal`, default SIGTERM;
 * SIGKILL after `stopTimeoutMs`) as soon as this process dies, however it dies: a SIGKILL of a test runner
 * runs no exit handler, so only another process can clean up. It notices the death twice over:
 * the pipe to its stdin closes (immediately, done by the kernel) and a poll of this process's pid
 * fails. Once the target is gone it removes `cleanupDir` (an ephemeral data folder), if given.
 * It exits by itself when the target exits first. Neither it nor its pipe keeps this process
 * alive.
 */
export function startGuardian(
  targetPid: number,
  stopTimeoutMs: number,
  cleanupDir?: string,
  stopSignal: NodeJS.Signals = 'SIGTERM',
): Guardian {
  const child = spawn(
    process.execPath,
    ['-e', GUARDIAN_SCRIPT, String(process.pid), String(targetPid), String(stopTimeoutMs), cleanupDir ?? '', stopSignal],
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  child.on('error', () => undefined);
  child.unref();
  (child.stdin as Socket).unref();
  return {
    pid: child.pid,
    dismiss() {
      // Killed before its stdin closes, so it cannot mistake the dismissal for our death.
      child.once('exit', () => child.stdin.destroy());
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      else child.stdin.destroy();
    },
  };
}

// Plain JavaScript run with `node -e`, so it needs neither tsx nor a file on disk.
const GUARDIAN_SCRIPT = `
const fs = require('node:fs');
const [parent, target, stopTimeoutMs] = process.argv.slice(1, 4).map(Number);
const cleanupDir = process.argv[4];
const stopSignal = process.argv[5];
const alive = (pid) => {
  try { process.kill(pid, 0); } catch (error) { return error.code === 'EPERM'; }
  try {
    const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch { return true; }
};
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  try { process.kill(target, stopSignal); } catch {}
  const deadline = Date.now() + stopTimeoutMs;
  setInterval(() => {
    if (!alive(target)) {
      if (cleanupDir) fs.rmSync(cleanupDir, { recursive: true, force: true });
      process.exit(0);
    }
    if (Date.now() > deadline) { try { process.kill(target, 'SIGKILL'); } catch {} }
  }, 200);
};
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
setInterval(() => {
  if (stopping) return;
  if (!alive(target)) process.exit(0);
  if (!alive(parent)) stop();
}, 500);
`;
