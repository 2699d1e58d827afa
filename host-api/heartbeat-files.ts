/**
 * The per-pipeline heartbeat files (docs/design.md section 9): written by the host while a
 * pipeline lives, read by `storage-consumer healthcheck` (one rule with `/healthz`). Their name,
 * content and age rule are part of the host's outward contract, so writer and reader are here
 * together, outside host/.
 */
import { mkdirSync, readFileSync, writeFile } from 'node:fs';
import { readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreLogger } from '../shared/logger.js';
import { isPipelineName } from '../shared/pipelines.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loggedError } from '../shared/errors.js';

/**
 * Heartbeat files belong to one host process: `<dir>/<pipeline>.<pid>.heartbeat`. Two hosts of
 * one pipeline on one machine (the documented second host with `STORAGE_PIPELINES=reviews`)
 * write two files, so a frozen or dead host can never pass its health check on the other's
 * writes. A folder serves one PID namespace (a machine, or a container): the check asks the
 * kernel whether a writer still runs.
 */

const FILE_NAME = /^([a-z][a-z-]*)\.(\d+)\.heartbeat$/;

/** The heartbeat file of one pipeline of one host process: `<dir>/<pipeline>.<pid>.heartbeat`. */
export function heartbeatFile(dir: string, pipeline: string, pid: number = process.pid): string {
  return join(dir, `${pipeline}.${pid}.heartbeat`);
}

/** What a heartbeat file holds (one JSON line); its age is read from the monotonic clock when it can be. */
interface HeartbeatContent {
  readonly pid: number;
  readonly pipeline: string;
  /** Wall-clock time of the write, for people. */
  readonly written_at: string;
  /** `process.hrtime` of the write in ms: CLOCK_MONOTONIC, shared by every process of one boot. */
  readonly monotonic_ms: number;
  /** The kernel's boot id (Linux): monotonic times compare only within one boot. */
  readonly boot_id: string | null;
}

const monotonicMs = (): number => Number(process.hrtime.bigint() / 1_000_000n);

let bootIdRead = false;
let bootIdValue: string | null = null;
/** The kernel's boot id, or null where there is none (not Linux): then ages come from file times. */
function bootId(): string | null {
  if (!bootIdRead) {
    bootIdRead = true;
    try {
      bootIdValue = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      bootIdValue = null;
    }
  }
  return bootIdValue;
}

/** Whether process `pid` runs in this PID namespace (EPERM: it runs, as another user). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Proof of life of one pipeline, written to a file the health check reads. */
export interface Heartbeat {
  /** Says the pipeline is alive; writes the file at most once per interval. Never throws. */
  beat(): void;
}

/**
 * A pipeline's heartbeat: `beat()` may be called as often as kafkajs emits consumer events;
 * the file is rewritten (with the current time) at most once per `intervalMs`. A failing write
 * is warned about once and otherwise ignored: a full disk must never stop ingestion. At the
 * start, files of this pipeline left by host processes that no longer run (and that nobody
 * rewrote for 4 intervals) are removed, so restarts do not pile files up.
 */
export function createHeartbeat(options: {
  readonly dir: string;
  readonly pipeline: string;
  readonly intervalMs: number;
  readonly logger: CoreLogger;
  /**
   * The clock of the interval and of `onWritten`, monotonic by default (a wall-clock step back
   * must not stop the writes); the file itself always holds wall and monotonic time.
   */
  readonly now?: () => number;
  /** Told the time (of `now`) of each write that succeeded (the progress record keeps it for `/healthz`). */
  readonly onWritten?: (at: number) => void;
}): Heartbeat {
  const now = options.now ?? (() => performance.now());
  const file = heartbeatFile(options.dir, options.pipeline);
  let last = -Infinity;
  let warned = false;
  let writing = false;
  const warn = (error: unknown) => {
    if (warned) return;
    warned = true;
    options.logger.warn('cannot write the heartbeat file; ingestion goes on, but the health check will fail', {
      pipeline: options.pipeline,
      file,
      ...loggedError(error),
    });
  };
  try {
    mkdirSync(options.dir, { recursive: true });
    void removeLeftHeartbeats(options.dir, options.pipeline, 4 * options.intervalMs);
  } catch (error) {
    warn(error);
  }
  return {
    beat() {
      const at = now();
      if (writing || at - last < options.intervalMs) return;
      last = at;
      writing = true;
      const content: HeartbeatContent = {
        pid: process.pid,
        pipeline: options.pipeline,
        written_at: new Date().toISOString(),
        monotonic_ms: monotonicMs(),
        boot_id: bootId(),
      };
      writeFile(file, `${JSON.stringify(content)}\n`, (error) => {
        writing = false;
        if (error) warn(error);
        else options.onWritten?.(at);
      });
    },
  };
}

/** Removes `pipeline`'s files of processes that do not run and were not written for `olderThanMs`. Never throws. */
async function removeLeftHeartbeats(dir: string, pipeline: string, olderThanMs: number): Promise<void> {
  try {
    for (const beat of await readHeartbeatFiles(dir)) {
      if (beat.pipeline === pipeline && beat.pid !== process.pid && !processRuns(beat.pid) && beat.ageMs > olderThanMs)
        await unlink(beat.file).catch(() => undefined);
    }
  } catch {
    // A folder that cannot be read is the write's problem, warned about there.
  }
}

/** One heartbeat file as found in the folder. */
interface FoundHeartbeat {
  readonly pipeline: PipelineName;
  readonly pid: number;
  readonly file: string;
  /** Age in ms: by the monotonic clock when the file holds a time of this boot, else by its modification time. */
  readonly ageMs: number;
}

async function readHeartbeatFiles(dir: string, now = Date.now(), monotonicNow = monotonicMs()): Promise<FoundHeartbeat[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const found: FoundHeartbeat[] = [];
  for (const name of names) {
    const match = FILE_NAME.exec(name);
    if (!match || !isPipelineName(match[1] as string)) continue;
    const file = join(dir, name);
    const modified = await stat(file).then(
      (stats) => stats.mtimeMs,
      () => undefined,
    );
    if (modified === undefined) continue;
    found.push({
      pipeline: match[1] as PipelineName,
      pid: Number(match[2]),
      file,
      ageMs: Math.round(ageOf(await readFile(file, 'utf8').catch(() => ''), modified, now, monotonicNow)),
    });
  }
  return found;
}

/**
 * A file's age. The monotonic time inside it is immune to wall-clock steps (a step back would
 * make a frozen host's file look fresh for as long as the step); a file of another boot, an
 * unreadable or half-written one, falls back to the modification time.
 */
function ageOf(text: string, modifiedMs: number, now: number, monotonicNow: number): number {
  let content: Partial<HeartbeatContent> | undefined;
  try {
    content = JSON.parse(text) as Partial<HeartbeatContent>;
  } catch {
    content = undefined;
  }
  const boot = bootId();
  if (
    content !== undefined &&
    boot !== null &&
    content.boot_id === boot &&
    typeof content.monotonic_ms === 'number' &&
    content.monotonic_ms <= monotonicNow
  )
    return monotonicNow - content.monotonic_ms;
  return Math.max(0, now - modifiedMs);
}

/** Why a health check fails. */
const HEARTBEAT_PROBLEMS = {
  missing: 'missing',
  stale: 'stale',
  notRunning: 'not_running',
  severalHosts: 'several_hosts',
} as const;

/** One reason the checked host is not healthy. */
export interface HeartbeatProblem {
  /** The pipeline; `null` for a problem of the folder (several hosts write there). */
  readonly pipeline: PipelineName | null;
  /** The host process checked; `null` when none could be chosen. */
  readonly pid: number | null;
  /** The file (`null`: no process to name it after); for `several_hosts`, the folder. */
  readonly file: string | null;
  /** Age of the file in ms; `undefined` when it is missing. */
  readonly ageMs: number | undefined;
  readonly reason: (typeof HEARTBEAT_PROBLEMS)[keyof typeof HEARTBEAT_PROBLEMS];
  /** One line for people. */
  readonly message: string;
}

/** The outcome of one health check. */
export interface HeartbeatCheck {
  /** The host process whose files were checked (`null`: none could be chosen). */
  readonly pid: number | null;
  /** Every host process with files in the folder, and whether it runs. */
  readonly hosts: ReadonlyArray<{ readonly pid: number; readonly running: boolean; readonly pipelines: readonly PipelineName[] }>;
  /** Empty: healthy. */
  readonly problems: readonly HeartbeatProblem[];
}

/**
 * Checks one host process's heartbeat files: each expected pipeline's file must exist and be at
 * most `maxAgeMs` old, and the process must run. The process is `pid`, or else the one running
 * process with files in the folder (inside a container: the host itself). With no running
 * writer, the newest writer is checked (so the answer names what went stale); with several, the
 * check fails and names them: which one is meant must be said (`--pid`).
 */
export async function checkHeartbeats(options: {
  readonly dir: string;
  readonly pipelines: readonly PipelineName[];
  readonly maxAgeMs: number;
  readonly pid?: number;
  readonly now?: number;
  readonly monotonicNow?: number;
  /** Whether a process runs; the kernel's answer unless a test says otherwise. */
  readonly runs?: (pid: number) => boolean;
}): Promise<HeartbeatCheck> {
  const runs = options.runs ?? processRuns;
  const found = await readHeartbeatFiles(options.dir, options.now, options.monotonicNow);
  const byPid = new Map<number, FoundHeartbeat[]>();
  for (const beat of found) byPid.set(beat.pid, [...(byPid.get(beat.pid) ?? []), beat]);
  const hosts = [...byPid.entries()]
    .sort(([a], [b]) => a - b)
    .map(([pid, beats]) => ({ pid, running: runs(pid), pipelines: beats.map((beat) => beat.pipeline).sort() }));
  let pid = options.pid;
  if (pid === undefined) {
    const running = hosts.filter((host) => host.running);
    if (running.length > 1) {
      const names = running.map((host) => `pid ${host.pid} (${host.pipelines.join(', ')})`).join(', ');
      const message = `${running.length} host processes write heartbeats in ${options.dir}: ${names}; name the one to check with --pid`;
      return {
        pid: null,
        hosts,
        problems: [{ pipeline: null, pid: null, file: options.dir, ageMs: undefined, reason: HEARTBEAT_PROBLEMS.severalHosts, message }],
      };
    }
    const newest = (host: (typeof hosts)[number]) => Math.min(...(byPid.get(host.pid) ?? []).map((beat) => beat.ageMs));
    pid = running[0]?.pid ?? [...hosts].sort((a, b) => newest(a) - newest(b))[0]?.pid;
  }
  const checked = pid;
  const beats = checked === undefined ? [] : (byPid.get(checked) ?? []);
  const alive = checked !== undefined && runs(checked);
  const problems: HeartbeatProblem[] = [];
  for (const pipeline of options.pipelines) {
    const beat = beats.find((candidate) => candidate.pipeline === pipeline);
    if (checked === undefined) {
      const message = `${pipeline}: no heartbeat file in ${options.dir}`;
      problems.push({ pipeline, pid: null, file: null, ageMs: undefined, reason: HEARTBEAT_PROBLEMS.missing, message });
    } else if (beat === undefined) {
      const file = heartbeatFile(options.dir, pipeline, checked);
      problems.push({
        pipeline,
        pid: checked,
        file,
        ageMs: undefined,
        reason: HEARTBEAT_PROBLEMS.missing,
        message: `${pipeline}: no heartbeat file ${file}`,
      });
    } else if (!alive) {
      const message = `${pipeline}: host process ${checked} is not running (heartbeat ${beat.ageMs} ms old in ${beat.file})`;
      problems.push({ pipeline, pid: checked, file: beat.file, ageMs: beat.ageMs, reason: HEARTBEAT_PROBLEMS.notRunning, message });
    } else if (beat.ageMs > options.maxAgeMs) {
      const message = `${pipeline}: heartbeat ${beat.ageMs} ms old (limit ${options.maxAgeMs} ms) in ${beat.file}`;
      problems.push({ pipeline, pid: checked, file: beat.file, ageMs: beat.ageMs, reason: HEARTBEAT_PROBLEMS.stale, message });
    }
  }
  return { pid: checked ?? null, hosts, problems };
}

/** The health check's default staleness limit: three heartbeat intervals plus one poll (16 s at the defaults). */
export function defaultMaxAgeMs(intervalMs: number, pollTimeoutMs: number): number {
  return 3 * intervalMs + pollTimeoutMs;
}
