import { mkdirSync, writeFile } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreLogger } from '../shared/logger.js';
import type { PipelineName } from '../shared/pipelines.js';

/** The heartbeat file of one pipeline: `<dir>/<pipeline>.heartbeat`. */
export function heartbeatFile(dir: string, pipeline: string): string {
  return join(dir, `${pipeline}.heartbeat`);
}

/** Proof of life of one pipeline, written to a file the health check reads. */
export interface Heartbeat {
  /** Says the pipeline is alive; writes the file at most once per interval. Never throws. */
  beat(): void;
}

/**
 * A pipeline's heartbeat: `beat()` may be called as often as kafkajs emits consumer events;
 * the file is rewritten (with the current time) at most once per `intervalMs`. A failing write
 * is warned about once and otherwise ignored: a full disk must never stop ingestion.
 */
export function createHeartbeat(options: {
  readonly dir: string;
  readonly pipeline: string;
  readonly intervalMs: number;
  readonly logger: CoreLogger;
  /** The monotonic clock the interval is measured on (a wall-clock step back must not stop the writes). */
  readonly now?: () => number;
  /** Told the (monotonic) time of each write that succeeded (the progress record keeps it for `/healthz`). */
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
      error: String(error),
    });
  };
  try {
    mkdirSync(options.dir, { recursive: true });
  } catch (error) {
    warn(error);
  }
  return {
    beat() {
      const at = now();
      if (writing || at - last < options.intervalMs) return;
      last = at;
      writing = true;
      writeFile(file, `${new Date().toISOString()}\n`, (error) => {
        writing = false;
        if (error) warn(error);
        else options.onWritten?.(at);
      });
    },
  };
}

/** One pipeline whose heartbeat is missing or too old. */
export interface HeartbeatProblem {
  readonly pipeline: PipelineName;
  readonly file: string;
  /** Age of the file in ms; `undefined` when it is missing. */
  readonly ageMs: number | undefined;
}

/**
 * Checks each expected pipeline's heartbeat file: missing, or last written more than
 * `maxAgeMs` ago, is a problem. Returns the problems (none = healthy).
 */
export async function checkHeartbeats(options: {
  readonly dir: string;
  readonly pipelines: readonly PipelineName[];
  readonly maxAgeMs: number;
  readonly now?: number;
}): Promise<HeartbeatProblem[]> {
  const now = options.now ?? Date.now();
  const problems: HeartbeatProblem[] = [];
  for (const pipeline of options.pipelines) {
    const file = heartbeatFile(options.dir, pipeline);
    const modified = await stat(file).then(
      (stats) => stats.mtimeMs,
      () => undefined,
    );
    if (modified === undefined) problems.push({ pipeline, file, ageMs: undefined });
    else if (now - modified > options.maxAgeMs) problems.push({ pipeline, file, ageMs: Math.round(now - modified) });
  }
  return problems;
}

/** The health check's default staleness limit: three heartbeat intervals plus one poll (16 s at the defaults). */
export function defaultMaxAgeMs(intervalMs: number, pollTimeoutMs: number): number {
  return 3 * intervalMs + pollTimeoutMs;
}
