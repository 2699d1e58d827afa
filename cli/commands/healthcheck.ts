import { checkHeartbeats, defaultMaxAgeMs } from '../../host/heartbeat.js';
import { loadHeartbeatSettings } from '../../host/settings.js';
import { loadSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, UsageError } from '../command.js';
import { renderJson } from '../output.js';
import { parseDuration } from '../time.js';

/** `healthcheck`: the host's per-pipeline heartbeat files are fresh. */
export const healthcheck: Command = {
  name: 'healthcheck',
  summary: "check the host's per-pipeline heartbeat files (container health check)",
  help: `Usage: storage-consumer healthcheck [--max-age <duration>] [--json]

Exit 0 when every pipeline of STORAGE_PIPELINES has a heartbeat file in STORAGE_HEARTBEAT_DIR
written recently, else exit 1 naming each pipeline whose file is missing or stale. Needs neither
Kafka nor the database: made for a container's HEALTHCHECK (npm run healthcheck runs it too).

  --max-age D   staleness limit such as 20s or 500ms (default: 3 heartbeat intervals plus one
                poll timeout: 16s with the default STORAGE_HEARTBEAT_INTERVAL_MS and
                STORAGE_POLL_TIMEOUT_MS)
  --json        the result as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(healthcheck, args, io, { ...JSON_OPTION, 'max-age': { type: 'string' } });
    if (!parsed) return EXIT.ok;
    const heartbeat = loadHeartbeatSettings(io.env);
    const pipelines = loadSettings(io.env).selectedPipelines;
    const rawMaxAge = parsed.values['max-age'];
    const maxAgeMs = rawMaxAge === undefined ? defaultMaxAgeMs(heartbeat.intervalMs, heartbeat.pollTimeoutMs) : parseDuration(rawMaxAge, '--max-age');
    if (maxAgeMs <= 0) throw new UsageError('--max-age must be longer than 0');
    const problems = await checkHeartbeats({ dir: heartbeat.dir, pipelines, maxAgeMs });
    if (parsed.values.json === true) {
      io.stdout(renderJson({ healthy: problems.length === 0, pipelines, maxAgeMs, problems }));
    } else {
      for (const problem of problems) {
        io.stdout(
          problem.ageMs === undefined
            ? `unhealthy: ${problem.pipeline}: no heartbeat file ${problem.file}\n`
            : `unhealthy: ${problem.pipeline}: heartbeat ${problem.ageMs} ms old (limit ${maxAgeMs} ms) in ${problem.file}\n`,
        );
      }
      if (problems.length === 0) io.stdout(`healthy: ${pipelines.join(', ')}\n`);
    }
    return problems.length === 0 ? EXIT.ok : EXIT.failed;
  },
};
