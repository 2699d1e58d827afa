/**
 * `storage-consumer healthcheck`, a container's health check: one host process's per-pipeline
 * heartbeat files (host-api/heartbeat-files.ts) or, with `--http`, its `/healthz` or `/readyz`
 * (docs/operations.md, "Heartbeat files: one per host process").
 */
import { checkHeartbeats, defaultMaxAgeMs } from '../../host-api/heartbeat-files.js';
import { HTTP_PATHS } from '../../host-api/http-paths.js';
import { loadHeartbeatSettings, loadHttpSettings } from '../../config/host-settings.js';
import type { Environment } from '../../shared/env.js';
import { loadConsumerSettings } from '../../config/pipeline-settings.js';
import { redactConnectionDetails } from '../../shared/redaction.js';
import type { CliIo } from '../command.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { renderJson } from '../output.js';
import { parseDuration } from '../time.js';

/** How long an HTTP check waits for the endpoint's answer. */
const HTTP_TIMEOUT_MS = 5_000;

/**
 * Asks the host's own endpoint (`STORAGE_HTTP_PORT`, on loopback when it binds every address):
 * exit 0 on 200, else 1 with what the endpoint says is missing.
 */
async function checkEndpoint(env: Environment, ready: boolean, json: boolean, io: CliIo): Promise<number> {
  const http = loadHttpSettings(env);
  if (http.port === 0) throw new UsageError('--http needs the endpoint: STORAGE_HTTP_PORT is 0 (off)');
  const host = http.host === '0.0.0.0' || http.host === '::' ? '127.0.0.1' : http.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${http.port}${ready ? HTTP_PATHS.ready : HTTP_PATHS.health}`;
  let status: number;
  let body: unknown;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
    status = response.status;
    const text = await response.text();
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  } catch (error) {
    const reason = redactConnectionDetails(error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error));
    if (json) io.stdout(renderJson({ healthy: false, url, error: reason }));
    else io.stdout(`unhealthy: ${url} does not answer: ${reason}\n`);
    return EXIT.failed;
  }
  const healthy = status === 200;
  if (json) {
    io.stdout(renderJson({ healthy, url, status, body }));
  } else if (healthy) {
    io.stdout(`healthy: ${url} answered 200\n`);
  } else {
    const missing =
      typeof body === 'object' && body !== null && Array.isArray((body as { missing?: unknown }).missing)
        ? ((body as { missing: unknown[] }).missing as unknown[])
        : [];
    io.stdout(`unhealthy: ${url} answered ${status}\n${missing.map((line) => `  ${String(line)}\n`).join('')}`);
  }
  return healthy ? EXIT.ok : EXIT.failed;
}

/** `healthcheck`: one host process's per-pipeline heartbeat files are fresh, or its HTTP endpoint says so. */
export const healthcheck = defineCommand({
  name: 'healthcheck',
  summary: "check one host process's per-pipeline heartbeat files or its HTTP endpoint (container health check)",
  usage: ['[--max-age <D>] [--pid <N>] [--json]', '--http [--ready] [--json]'],
  description: `Exit 0 when one host process has a heartbeat file in STORAGE_HEARTBEAT_DIR for every pipeline of
STORAGE_PIPELINES, each written recently, and that process runs; else exit 1 naming each pipeline
whose file is missing or stale. Needs neither Kafka nor the database: made for a container's
HEALTHCHECK (npm run healthcheck runs it too).

A host writes <pipeline>.<pid>.heartbeat: the files of one process prove nothing about another.
The process checked is --pid, or else the one running host process with files in the folder
(inside a container: the host). When several running hosts write there (two hosts on one
machine), the check fails and names them: say which one with --pid.

The host writes a pipeline's file while the pipeline has not failed or stopped, and its /healthz
applies this same rule to the same writes. STORAGE_HEARTBEAT_DIR defaults to
<os tmpdir>/storage-consumer/heartbeats, wherever the command runs.`,
  options: {
    'max-age': {
      type: 'string',
      value: 'D',
      help:
        'staleness limit such as 20s or 500ms (default: 3 heartbeat intervals plus one poll timeout: 16s with the default ' +
        'STORAGE_HEARTBEAT_INTERVAL_MS and STORAGE_POLL_TIMEOUT_MS)',
    },
    pid: { type: 'string', value: 'N', help: 'check the host process N (its files, and that it runs)' },
    http: {
      type: 'boolean',
      help:
        "ask the host's HTTP endpoint instead (STORAGE_HTTP_PORT, default 9464, on 127.0.0.1 unless STORAGE_HTTP_HOST names " +
        'one address): /healthz, exit 0 on 200',
    },
    ready: {
      type: 'boolean',
      help:
        'with --http: ask /readyz instead (every pipeline RUNNING: in its consumer group, fetching, not stalled; its database ' +
        'answering); exit 1 names what is missing',
    },
    ...jsonOption('the result as JSON'),
  },
  async run({ values }, io) {
    if (values.ready === true && values.http !== true) throw new UsageError('--ready goes with --http');
    if (values.http === true) {
      if (values['max-age'] !== undefined || values.pid !== undefined)
        throw new UsageError('--max-age and --pid are for heartbeat files, not --http');
      return checkEndpoint(io.env, values.ready === true, values.json === true, io);
    }
    const heartbeat = loadHeartbeatSettings(io.env);
    const pipelines = loadConsumerSettings(io.env).selectedPipelines;
    const rawMaxAge = values['max-age'];
    const maxAgeMs =
      rawMaxAge === undefined ? defaultMaxAgeMs(heartbeat.intervalMs, heartbeat.pollTimeoutMs) : parseDuration(rawMaxAge, '--max-age');
    if (maxAgeMs <= 0) throw new UsageError('--max-age must be longer than 0');
    const rawPid = values.pid;
    if (rawPid !== undefined && !/^[1-9]\d{0,9}$/.test(rawPid))
      throw new UsageError(`--pid must be a process id, not ${JSON.stringify(rawPid)}`);
    const pid = rawPid === undefined ? undefined : Number(rawPid);
    const { problems, pid: checked, hosts } = await checkHeartbeats({ dir: heartbeat.dir, pipelines, maxAgeMs, pid });
    if (values.json === true) {
      io.stdout(renderJson({ healthy: problems.length === 0, pid: checked, pipelines, maxAgeMs, problems, hosts }));
    } else {
      for (const problem of problems) io.stdout(`unhealthy: ${problem.message}\n`);
      if (problems.length === 0) io.stdout(`healthy: ${pipelines.join(', ')}\n`);
    }
    return problems.length === 0 ? EXIT.ok : EXIT.failed;
  },
});
