/**
 * The host's health in one place: its life-cycle states, liveness (`/healthz`, the same rule as
 * `storage-consumer healthcheck`) and readiness (`/readyz`: per pipeline its progress verdict and
 * whether its database answers, and what keeps the host from being ready). Pure over what it is
 * given (the state, the progress views, the invokers' pings, the time): the supervisor wires it.
 */
import type { PipelineName } from '../shared/pipelines.js';
import { errorCode, redactConnectionDetails } from '../shared/redaction.js';
import type { Invoker } from './invoker.js';
import type { PipelineView } from './metrics.js';
import type { PipelineState } from './progress.js';
import { describeBatch } from './progress.js';
import type { HostSettings } from '../config/host-settings.js';
import { TIMED_OUT, within } from '../shared/timeout.js';

/** The host's life cycle (docs/design.md section 9). */
export const HOST_STATES = ['Starting', 'Migrating', 'Running', 'Stopping', 'Failing', 'Stopped'] as const;
export type HostState = (typeof HOST_STATES)[number];

/**
 * The answer of `/healthz`. A pipeline is alive while its heartbeat file was written within the
 * health check's default limit (3 heartbeat intervals plus one poll timeout); the file is written
 * while the pipeline has not failed or stopped. So `/healthz` fails exactly when `storage-consumer
 * healthcheck` does (one rule, two transports), and also once the host is Failing or Stopped.
 */
export interface Liveness {
  readonly alive: boolean;
  readonly state: HostState;
  readonly maxAgeMs: number;
  /** Per pipeline: its state and the age of its heartbeat (ms; `null`: never written). */
  readonly pipelines: Readonly<Partial<Record<PipelineName, { readonly state: PipelineState; readonly heartbeatAgeMs: number | null }>>>;
  /** Why not alive, one line each; empty when alive. */
  readonly missing: readonly string[];
}

/**
 * `/healthz` now: alive while the host is neither Failing nor Stopped and every pipeline's
 * heartbeat is at most `maxAgeMs` old at `now` (monotonic ms, the clock the beats were taken on).
 */
export function evaluateLiveness(state: HostState, views: readonly PipelineView[], maxAgeMs: number, now: number): Liveness {
  const pipelines: Partial<Record<PipelineName, { state: PipelineState; heartbeatAgeMs: number | null }>> = {};
  const missing: string[] = [];
  if (state === 'Failing' || state === 'Stopped') missing.push(`host: ${state}`);
  for (const { snapshot, verdict } of views) {
    const age = snapshot.lastBeatAt === undefined ? null : now - snapshot.lastBeatAt;
    pipelines[snapshot.pipeline] = { state: verdict.state, heartbeatAgeMs: age };
    if (age === null) missing.push(`${snapshot.pipeline}: no heartbeat written yet`);
    else if (age > maxAgeMs) missing.push(`${snapshot.pipeline}: heartbeat ${age} ms old (limit ${maxAgeMs} ms; ${verdict.state})`);
  }
  return { alive: missing.length === 0, state, maxAgeMs, pipelines, missing };
}

/** One pipeline as readiness sees it (derived from its progress record). */
export interface PipelineReadiness {
  /** The pipeline's state (host/progress.ts). */
  readonly state: PipelineState;
  readonly ready: boolean;
  /** The consumer holds its place in its group (joined, not rebalancing, not crashed). */
  readonly joined: boolean;
  readonly failed: boolean;
  /** Paused by an operator (`pipeline_pauses`): still ready, fetching nothing. */
  readonly paused: boolean;
  /**
   * `ok`; `pool held (N of N connections busy)` when the database answers but the pipeline's pool
   * is held (a blocked batch); why the database does not answer (an error code, never a host or
   * user name); or why it was not checked.
   */
  readonly database: string;
}

/** The answer of `/readyz`: ready only when every pipeline is RUNNING and its database answers. */
export interface Readiness {
  readonly ready: boolean;
  readonly state: HostState;
  readonly pipelines: Readonly<Partial<Record<PipelineName, PipelineReadiness>>>;
  /** What keeps the host from being ready, one line each; empty when ready. */
  readonly missing: readonly string[];
}

/** A readiness database check never waits longer than this. */
const READINESS_DATABASE_TIMEOUT_MS = 3_000;

/** One pipeline as a readiness check reads it. */
export interface ReadinessPipeline {
  /** Its invoker; `undefined` before the host built it. */
  readonly invoker: Invoker | undefined;
  /** Its progress record and the verdict on it, now. */
  view(): PipelineView;
}

/** What a readiness check reads of the host, at the moment it reads it. */
export interface ReadinessSource {
  readonly settings: HostSettings;
  /** The host's life-cycle state now. */
  state(): HostState;
  /** The host's pipelines by name. */
  readonly pipelines: ReadonlyMap<PipelineName, ReadinessPipeline>;
}

/** A ping's verdict: `database` as {@link PipelineReadiness} shows it, and what holds a full pool. */
interface PingVerdict {
  readonly database: string;
  readonly held?: { readonly size: number; readonly waits: readonly string[] };
}

/** `ok`, the pool is held, or why a pipeline's database does not answer its invoker's ping within the limit. */
async function pingDatabase(invoker: Invoker | undefined, settings: HostSettings): Promise<PingVerdict> {
  const database = await pingText(invoker, settings);
  return typeof database === 'string'
    ? { database }
    : { database: `pool held (${database.size} of ${database.size} connections busy)`, held: database };
}

async function pingText(invoker: Invoker | undefined, settings: HostSettings): Promise<string | NonNullable<PingVerdict['held']>> {
  if (invoker?.ping === undefined)
    return settings.invoke.mode === 'lambda' ? 'not checked (the functions hold the database)' : 'not started';
  try {
    const result = await within(invoker.ping(), READINESS_DATABASE_TIMEOUT_MS);
    if (result === TIMED_OUT) return `no answer within ${READINESS_DATABASE_TIMEOUT_MS} ms`;
    return result?.poolHeld ?? 'ok';
  } catch (error) {
    // Its code (`ECONNREFUSED`, `57P03`), never its message: that may name an address or a user.
    return errorCode(error);
  }
}

/**
 * A pipeline's ping. Held, but no batch of this host in flight once the ping is over: the batch that
 * held the pool ended while the ping asked the database, and a second ping says what the pool is now.
 */
async function pingPipeline(pipeline: ReadinessPipeline, settings: HostSettings): Promise<PingVerdict> {
  const verdict = await pingDatabase(pipeline.invoker, settings);
  if (verdict.held === undefined || pipeline.view().snapshot.inFlight.length > 0) return verdict;
  return pingDatabase(pipeline.invoker, settings);
}

/**
 * The database answers, but the pipeline's pool is held: by which batch (the oldest in flight, as
 * the stall line names it) and what its statements wait on.
 */
function poolHeldLine(name: string, held: NonNullable<PingVerdict['held']>, snapshot: PipelineView['snapshot']): string {
  const oldest = [...snapshot.inFlight].sort((a, b) => a.startedAt - b.startedAt)[0];
  const batch = oldest === undefined ? 'no batch of this host in flight' : `the batch in flight: ${describeBatch(oldest)}`;
  const waits = held.waits.length === 0 ? '' : `; ${held.waits.join('; ')}`;
  return `${name}: database answers, but all ${held.size} connection(s) of the pipeline's pool are held by ${batch}${waits}`;
}

/**
 * `/readyz`: ready only when the host is Running, every pipeline's progress verdict is ready and
 * (in-process invocation) its database answers. Reads the host's state and progress when it needs
 * them: before the database checks, and after.
 */
export async function evaluateReadiness(host: ReadinessSource): Promise<Readiness> {
  const { settings } = host;
  const entries = [...host.pipelines];
  // Only a running host's pools are pinged: a stopping or stopped invoker would open a new pool
  // that nothing closes, and the state alone already makes such a host not ready.
  const running = host.state() === 'Running';
  const databases = await Promise.all(
    entries.map(([, pipeline]) =>
      running ? pingPipeline(pipeline, settings) : Promise.resolve({ database: `not checked (host ${host.state()})` }),
    ),
  );
  const pipelines: Partial<Record<PipelineName, PipelineReadiness>> = {};
  const missing: string[] = [];
  const state = host.state();
  if (state !== 'Running') missing.push(`host: ${state}`);
  entries.forEach(([name, pipeline], index) => {
    const { snapshot, verdict } = pipeline.view();
    const { database, held } = databases[index] as PingVerdict;
    pipelines[name] = {
      state: verdict.state,
      ready: verdict.ready,
      joined: snapshot.inGroup,
      failed: verdict.state === 'FAILED',
      paused: snapshot.paused,
      database,
    };
    // A cause may quote a crash (`connect ECONNREFUSED 10.0.0.5:9092`): /readyz answers anyone who reaches the port.
    missing.push(...verdict.causes.map(redactConnectionDetails));
    if (running && held !== undefined) missing.push(redactConnectionDetails(poolHeldLine(name, held, snapshot)));
    else if (running && database !== 'ok' && settings.invoke.mode !== 'lambda')
      missing.push(`${name}: database does not answer: ${database}`);
  });
  return { ready: missing.length === 0, state, pipelines, missing };
}
