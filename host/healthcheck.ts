import { stat } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { PipelineName } from '../shared/pipeline-names.js';
import { loadSettings } from '../shared/settings.js';
import { heartbeatFile } from './heartbeat.js';
import { loadHeartbeatSettings } from './settings.js';

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

/** The default staleness limit: three heartbeat intervals plus one poll. */
export function defaultMaxAgeMs(intervalMs: number, pollTimeoutMs: number): number {
  return 3 * intervalMs + pollTimeoutMs;
}

/**
 * The health-check command (`npm run healthcheck [-- --max-age-ms N]`): exit 0 when every
 * pipeline in STORAGE_PIPELINES has a fresh heartbeat, else exit 1 naming each one that has
 * not. Reads the same variables as the host; needs no Kafka and no database.
 */
export async function healthcheckMain(argv: readonly string[] = process.argv.slice(2), env = process.env): Promise<number> {
  try {
    const { values } = parseArgs({ args: [...argv], options: { 'max-age-ms': { type: 'string' } } });
    const heartbeat = loadHeartbeatSettings(env);
    const pipelines = loadSettings(env).selectedPipelines;
    const raw = values['max-age-ms'];
    const maxAgeMs = raw === undefined ? defaultMaxAgeMs(heartbeat.intervalMs, heartbeat.pollTimeoutMs) : Number(raw);
    if (!Number.isSafeInteger(maxAgeMs) || maxAgeMs <= 0) throw new Error(`--max-age-ms must be a positive whole number, got ${raw}`);
    const problems = await checkHeartbeats({ dir: heartbeat.dir, pipelines, maxAgeMs });
    for (const problem of problems) {
      console.error(
        problem.ageMs === undefined
          ? `unhealthy: ${problem.pipeline}: no heartbeat file ${problem.file}`
          : `unhealthy: ${problem.pipeline}: heartbeat ${problem.ageMs} ms old (limit ${maxAgeMs} ms) in ${problem.file}`,
      );
    }
    if (problems.length === 0) console.log(`healthy: ${pipelines.join(', ')}`);
    return problems.length === 0 ? 0 : 1;
  } catch (error) {
    console.error(`healthcheck failed: ${(error as Error).message}`);
    return 1;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await healthcheckMain();
}
