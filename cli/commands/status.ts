/**
 * `storage-consumer status` (docs/operations.md, "Status"): each pipeline as Kafka and PostgreSQL
 * have it (group, members and their partitions, offsets, lag, pause state) and, with `--host`, one
 * host's own view: the status document of host-api/status-document.ts.
 */
import { pipelineStatusPath } from '../../host-api/http-paths.js';
import type { PipelineStatusDocument } from '../../host-api/status-document.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { readPipelinePauses } from '../../shared/pause-store.js';
import type { PipelinePause } from '../../shared/pause-store.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import type { GroupPosition } from '../../kafka/lag.js';
import { groupPosition } from '../../kafka/lag.js';
import { positionJson, withKafkaAdmin } from '../kafka.js';
import { errorText, renderJson, renderTable } from '../output.js';
import { redactConnectionDetails } from '../../shared/redaction.js';
import { parsePipeline, PIPELINE_OPTION, pipelinesFor } from './pipeline-option.js';
import { envSuffix } from '../../shared/pipeline-spec.js';

/** A host's status endpoint gets this long to answer. */
const HOST_TIMEOUT_MS = 5_000;

/** One pipeline as `status` reports it. */
interface PipelineView {
  readonly position: GroupPosition;
  readonly pause: PipelinePause | undefined;
  /** The host's own view (`--host`), or why it could not be had. */
  readonly host: PipelineStatusDocument | { readonly error: string } | undefined;
}

async function hostStatus(base: string, pipeline: PipelineName): Promise<PipelineStatusDocument | { error: string }> {
  const url = `${base.replace(/\/+$/, '')}${pipelineStatusPath(pipeline)}`;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(HOST_TIMEOUT_MS) });
    const body = (await response.json()) as PipelineStatusDocument & { error?: string };
    if (!response.ok) return { error: `${url} answered ${response.status}: ${body.error ?? 'no reason given'}` };
    return body;
  } catch (error) {
    return { error: `${url}: ${unreachableCause(error)}` };
  }
}

/**
 * Why a host's endpoint could not be asked, in words: fetch itself only says `fetch failed`; the
 * cause (`connect ECONNREFUSED <address>`, `getaddrinfo ENOTFOUND <host>`: through the one
 * redaction, as every CLI error line) is what the operator acts on.
 */
export function unreachableCause(error: unknown): string {
  if (error instanceof Error && error.name === 'TimeoutError') return `no answer within ${HOST_TIMEOUT_MS / 1000} s`;
  const cause = error instanceof Error ? (error.cause as { message?: unknown; code?: unknown } | undefined) : undefined;
  const detail =
    typeof cause?.message === 'string' && cause.message !== '' ? cause.message : typeof cause?.code === 'string' ? cause.code : '';
  return `cannot reach the host: ${detail === '' ? errorText(error) : redactConnectionDetails(detail)}`;
}

const memberName = (clientId: string, clientHost: string) => `${clientId}@${clientHost}`;

function pauseLine(pause: PipelinePause | undefined, pauseError: string | undefined): string {
  if (pauseError !== undefined) return `pause state unknown: ${pauseError}`;
  if (pause === undefined) return 'not paused';
  if (!pause.paused) return `not paused (resumed by ${pause.by} at ${pause.at.toISOString()})`;
  return `PAUSED by ${pause.by} at ${pause.at.toISOString()}${pause.reason ? `: ${pause.reason}` : ''}`;
}

/** The host's view under a pipeline of `status --host`, with a warning when it consumes another group than the one looked at. */
export function hostLines(host: PipelineView['host'], position: GroupPosition): string {
  if (host === undefined) return '';
  if ('error' in host) return `  host: ${host.error}\n`;
  const lines = [`  host ${host.host_id}: ${host.state}, member ${host.member_id ?? '-'}`];
  if (
    host.group !== position.group ||
    (host.member_id !== null && !position.members.some((member) => member.memberId === host.member_id))
  ) {
    lines.push(
      host.group !== position.group
        ? `    WARNING: the host consumes group ${host.group}, this command looked at group ${position.group}: ` +
            `set STORAGE_GROUP_${envSuffix(position.pipeline)}=${host.group} here as the host has it`
        : `    WARNING: the host's member ${host.member_id} is not among the group's members as the broker lists them (a rebalance?)`,
    );
  }
  if (host.last_error === undefined) {
    lines.push('    in flight, last error: not reported by this host');
    return `${lines.join('\n')}\n`;
  }
  for (const partition of host.partitions) {
    const batch = partition.in_flight;
    if (batch === null || batch === undefined) continue;
    const error = batch.last_error ? `, last error: ${batch.last_error.message}` : '';
    const retries = (batch.retries ?? 0) === 0 ? '' : ` (${batch.retries} database ${batch.retries === 1 ? 'retry' : 'retries'})`;
    lines.push(
      `    in flight: partition ${partition.partition} offsets ${batch.first_offset}..${batch.last_offset}, ` +
        `attempt ${batch.attempt}${retries}, since ${batch.started_at}${error}`,
    );
  }
  if (!host.partitions.some((partition) => partition.in_flight !== null && partition.in_flight !== undefined))
    lines.push('    in flight: none');
  lines.push(`    last error: ${host.last_error ? `${host.last_error.at} ${host.last_error.message}` : 'none'}`);
  return `${lines.join('\n')}\n`;
}

function renderView(view: PipelineView, pauseError: string | undefined): string {
  const { position } = view;
  const owner = new Map<number, string>();
  for (const member of position.members) for (const partition of member.partitions) owner.set(partition, member.memberId);
  const members =
    position.members.length === 0
      ? '  members: none\n'
      : `  members:\n${position.members
          .map(
            (member) =>
              `    ${member.memberId} (${memberName(member.clientId, member.clientHost)}): partitions ` +
              `${member.partitions.length === 0 ? 'none' : member.partitions.join(', ')}`,
          )
          .join('\n')}\n`;
  const table = renderTable(
    [
      { header: 'PARTITION', value: (row) => row.partition, align: 'right' },
      { header: 'OWNER', value: (row) => owner.get(row.partition) ?? 'none' },
      { header: 'COMMITTED', value: (row) => row.committed ?? 'none', align: 'right' },
      { header: 'END', value: (row) => row.end, align: 'right' },
      { header: 'LAG', value: (row) => row.lag, align: 'right' },
    ],
    position.partitions,
  );
  return (
    `${position.pipeline}: group ${position.group} on ${position.topic}, ${position.state}, ${position.members.length} member(s), lag ` +
    `${position.lag}\n` +
    `  ${pauseLine(view.pause, pauseError)}\n${members}${hostLines(view.host, position)}${table
      .split('\n')
      .map((line) => (line === '' ? line : `  ${line}`))
      .join('\n')}`
  );
}

function viewJson(view: PipelineView, pauseError: string | undefined) {
  const position = positionJson(view.position);
  return {
    ...position,
    members: view.position.members.map((member) => ({ ...member, partitions: [...member.partitions] })),
    pause:
      pauseError !== undefined
        ? { error: pauseError }
        : {
            paused: view.pause?.paused ?? false,
            by: view.pause?.by ?? null,
            at: view.pause?.at.toISOString() ?? null,
            reason: view.pause?.reason ?? null,
          },
    ...(view.host === undefined ? {} : { host: view.host }),
  };
}

/** `status`: the cluster view of every pipeline, from Kafka and PostgreSQL, and one host's live view. */
export const status = defineCommand({
  name: 'status',
  summary: 'per pipeline: group, members and their partitions, offsets, lag, pause state',
  description: `The cluster view of each pipeline (those of STORAGE_PIPELINES, or just P), from Kafka and
PostgreSQL: the group's state, its members with their partitions, per partition the owner, the
committed offset, the end offset and the lag, and whether the pipeline is paused (who, when,
why; from pipeline_pauses). It needs no host.

Exit code 1 when the pause state or the host could not be read (the rest is printed).`,
  options: {
    host: {
      type: 'string',
      value: 'URL',
      help:
        "also that host's live view from its HTTP endpoint (e.g. http://host-1:9464): its state, the batches it has in " +
        'flight and its last error',
    },
    ...PIPELINE_OPTION,
    ...jsonOption('the same as JSON (offsets as strings)'),
  },
  async run({ values }, io) {
    const named = parsePipeline(values.pipeline);
    const host = values.host;
    if (host !== undefined && !/^https?:\/\/\S+$/.test(host))
      throw new UsageError(`--host must be an http(s) URL such as http://127.0.0.1:9464, got ${JSON.stringify(host)}`);
    const positions = await withKafkaAdmin(io, ({ admin, settings }) =>
      Promise.all(pipelinesFor(settings, named).map((name) => groupPosition(admin, settings.pipelines[name]))),
    );
    let pauses = new Map<PipelineName, PipelinePause>();
    let pauseError: string | undefined;
    try {
      pauses = await withDatabase(io, ({ pool }) => readPipelinePauses(pool));
    } catch (error) {
      pauseError = (error as Error).message;
    }
    const views: PipelineView[] = await Promise.all(
      positions.map(async (position) => ({
        position,
        pause: pauses.get(position.pipeline as PipelineName),
        host: host === undefined ? undefined : await hostStatus(host, position.pipeline as PipelineName),
      })),
    );
    if (values.json === true) io.stdout(renderJson({ pipelines: views.map((view) => viewJson(view, pauseError)) }));
    else io.stdout(views.map((view) => renderView(view, pauseError)).join('\n'));
    const hostFailed = views.some((view) => view.host !== undefined && 'error' in view.host);
    return pauseError !== undefined || hostFailed ? EXIT.failed : EXIT.ok;
  },
});
