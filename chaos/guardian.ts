/**
 * The run's guardian: a tiny detached Node process that, should the harness die without cleaning
 * up (a SIGKILL runs no exit handler), kills what the run started. It reads the pids at that
 * moment from the work folder, so servers restarted during the run are covered too: the
 * PostgreSQL postmaster (`postgres/postmaster.pid`, immediate shutdown), the broker
 * (`kafka/broker.pid`) and every host process (`hosts.pid`, one pid a line). It notices the
 * harness's death through its stdin pipe (closed by the kernel) and by polling the pid.
 */
import { spawn } from 'node:child_process';
import { appendFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';

/** A running guardian. */
export interface RunGuardian {
  /** Records a host pid, to be killed should the harness die. */
  recordHost(pid: number): Promise<void>;
  /** Ends the guardian (after the harness cleaned up itself). */
  dismiss(): void;
}

/** Starts the guardian of the run whose work folder is `workDir`. */
export function startRunGuardian(workDir: string): RunGuardian {
  const child = spawn(process.execPath, ['-e', GUARDIAN_SCRIPT, String(process.pid), workDir], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.on('error', () => undefined);
  child.unref();
  (child.stdin as Socket).unref();
  return {
    recordHost: (pid) => appendFile(join(workDir, 'hosts.pid'), `${pid}\n`),
    dismiss() {
      // Killed before its stdin closes, so it cannot mistake the dismissal for the harness's death.
      child.once('exit', () => child.stdin.destroy());
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      else child.stdin.destroy();
    },
  };
}

// Plain JavaScript run with `node -e`: it needs neither tsx nor a file on disk.
const GUARDIAN_SCRIPT = `
const fs = require('node:fs');
const path = require('node:path');
const parent = Number(process.argv[1]);
const workDir = process.argv[2];
const pidsIn = (file) => { try { return fs.readFileSync(path.join(workDir, file), 'utf8').split('\\n').map(Number).filter((pid) => pid > 0); } catch { return []; } };
const commandLine = (pid) => { try { return fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0').join(' '); } catch { return ''; } };
// A pid from a file may have been reused since: signal it only if it still is what it was.
const signal = (pid, name, mark) => { if (commandLine(pid).includes(mark)) { try { process.kill(pid, name); } catch {} } };
let done = false;
const cleanUp = () => {
  if (done) return;
  done = true;
  for (const pid of pidsIn('hosts.pid')) signal(pid, 'SIGKILL', 'host/main.ts');
  for (const pid of pidsIn('postgres/postmaster.pid').slice(0, 1)) signal(pid, 'SIGQUIT', workDir);
  for (const pid of pidsIn('kafka/broker.pid')) signal(pid, 'SIGKILL', workDir);
  process.exit(0);
};
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);
process.stdin.on('end', cleanUp);
process.stdin.on('error', cleanUp);
process.stdin.resume();
setInterval(() => {
  try { process.kill(parent, 0); } catch (error) { if (error.code !== 'EPERM') cleanUp(); }
}, 500);
`;
