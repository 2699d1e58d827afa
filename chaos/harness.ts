/**
 * The chaos run: a seeded workload through the real broker, the real host (as child processes)
 * and PostgreSQL, with faults injected while batches are in flight, then an exact check of the
 * final state. Everything runs on the run's own broker and database server, in a work folder
 * of its own.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { main as cliMain } from '../cli/main.js';
import { ensureTopics } from '../kafka/topics.js';
import { envSuffix } from '../shared/pipeline-spec.js';
import { PIPELINE_NAMES, PIPELINES } from '../shared/pipelines.js';
import { CHAOS_PIPELINES } from './plan.js';
import type { PipelineName } from '../shared/pipelines.js';
import { checkCommittedOffsets, checkDatabase } from './checker.js';
import type { DatabaseCheck, OffsetGap } from './checker.js';
import type { FaultKind, FaultPlan, ScheduledFault } from './faults.js';
import { injectFault, scheduleFaults } from './faults.js';
import { startRunGuardian } from './guardian.js';
import type { RunGuardian } from './guardian.js';
import { chaosKafkaClient, HostFleet, hostEnvironment } from './hosts.js';
import type { UnexpectedExit } from './hosts.js';
import { ChaosKafka } from './kafka.js';
import type { GroupTopic } from './kafka.js';
import { expectedState } from './model.js';
import { createRandom } from './random.js';
import { ReviewWatch } from './review-watch.js';
import { countHostLogs } from './report.js';
import { checkerSelfTest } from './self-test.js';
import type { SelfTestResult } from './self-test.js';
import { prepareChaosDatabase, startChaosBroker, startChaosDatabase } from './servers.js';
import type { ChaosBroker, ChaosDatabase } from './servers.js';
import { generateWorkload } from './workload.js';

/** What to run. */
export interface ChaosOptions extends Partial<FaultPlan> {
  readonly messages: number;
  readonly seed: number;
  /** Where the broker, the database and the host logs live; default: a fresh temporary folder. */
  readonly workDir?: string;
  /** Keep the work folder even when the run passes (it is always kept when it fails). */
  readonly keep?: boolean;
  /** No commit progress for this long while records wait: the run is declared stalled. */
  readonly stallTimeoutMs?: number;
  /** Progress lines (default: stdout). */
  readonly log?: (line: string) => void;
  /** After the check, damage the database in known ways and check that the checker sees it (default true). */
  readonly selfTest?: boolean;
  /**
   * After the check (before the self-test damages anything), run `storage-consumer reconcile
   * --from earliest` on the run's broker and database, as text and as JSON: it must find nothing
   * missing or wrong and every dead letter the model expects (`npm run chaos -- --reconcile`).
   */
  readonly reconcile?: boolean;
}

/** What `storage-consumer reconcile` printed after the run, and its exit codes. */
export interface ChaosReconcile {
  readonly code: number;
  readonly text: string;
  readonly jsonCode: number;
  readonly json: string;
  readonly missing: number;
  readonly wrong: number;
  readonly deadLettered: number;
  readonly letterGone: number;
}

/** One injected fault, as it happened. */
export interface FaultEvent {
  readonly kind: FaultKind;
  readonly at: number;
  readonly elapsedS: number;
  readonly detail: string;
}

/** The last line of the report. */
export interface ChaosSummary {
  readonly messages: number;
  readonly faults: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly wrong: number;
  readonly dlq_expected: number;
  readonly dlq_found: number;
  readonly seed: number;
  /** The Kafka client the hosts and reconcile ran on (KAFKA_CLIENT). */
  readonly kafka_client: string;
  readonly elapsed_s: number;
  /** Dead letters missing, unexpected or with the wrong reason. */
  readonly dlq_mismatched: number;
  /** Partitions whose group did not commit up to the end. */
  readonly offsets_behind: number;
  /** With `reconcile`: what it found missing and wrong, and the dead letters it accounted for. */
  readonly reconcile_missing?: number;
  readonly reconcile_wrong?: number;
  readonly reconcile_dead_lettered?: number;
  readonly passed: boolean;
}

/** Everything the run found. */
export interface ChaosResult {
  readonly summary: ChaosSummary;
  readonly workload: {
    readonly byTopic: Record<PipelineName, number>;
    readonly byLabel: Record<string, number>;
    readonly recordsInLog: number;
  };
  readonly faults: readonly FaultEvent[];
  readonly database: DatabaseCheck;
  readonly offsetGaps: readonly OffsetGap[];
  readonly partitionsChecked: number;
  readonly watch: {
    readonly observed: number;
    readonly scored: number;
    readonly moved: readonly string[];
    readonly overwritten: readonly string[];
  };
  readonly unexpectedExits: readonly UnexpectedExit[];
  readonly finalExits: ReadonlyArray<{ name: string; code: number | null; signal: NodeJS.Signals | null }>;
  readonly hostLogs: Record<string, number>;
  readonly stalled: boolean;
  readonly selfTest: SelfTestResult | undefined;
  readonly reconcile: ChaosReconcile | undefined;
  readonly workDir: string;
  readonly workDirKept: boolean;
}

const TOPICS = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].topic])) as Record<PipelineName, string>;
const GROUPS: GroupTopic[] = PIPELINE_NAMES.map((pipeline) => ({ pipeline, group: PIPELINES[pipeline].group, topic: TOPICS[pipeline] }));

/** `storage-consumer reconcile --from earliest`, as text and as JSON, against the run's broker and database. */
async function reconcileRun(brokers: readonly string[], databaseUrl: string, log: (line: string) => void): Promise<ChaosReconcile> {
  const env: Record<string, string> = {
    KAFKA_BROKERS: brokers.join(','),
    DATABASE_URL: databaseUrl,
    STORAGE_ACTOR: 'chaos',
    ...chaosKafkaClient(),
  };
  for (const { pipeline, group, topic } of GROUPS) {
    env[`STORAGE_TOPIC_${envSuffix(pipeline)}`] = topic;
    env[`STORAGE_GROUP_${envSuffix(pipeline)}`] = group;
  }
  const run = async (argv: string[]) => {
    let printed = '';
    const code = await cliMain(argv, { stdout: (text) => void (printed += text), stderr: (text) => void (printed += text), env });
    return { code, printed };
  };
  log('storage-consumer reconcile --from earliest');
  const text = await run(['reconcile', '--from', 'earliest']);
  const json = await run(['reconcile', '--from', 'earliest', '--json']);
  const report = JSON.parse(json.printed) as { missing: number; wrong: number; dead_lettered: number; letter_gone: number };
  return {
    code: text.code,
    text: text.printed,
    jsonCode: json.code,
    json: json.printed,
    missing: report.missing,
    wrong: report.wrong,
    deadLettered: report.dead_lettered,
    letterGone: report.letter_gone,
  };
}

/** Runs one chaos run; never leaves a process behind, whatever happens. */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const began = Date.now();
  const elapsed = () => (Date.now() - began) / 1000;
  const print = options.log ?? ((line: string) => console.log(line));
  const log = (line: string) => print(`[${elapsed().toFixed(1).padStart(6)}s] ${line}`);
  const plan: FaultPlan = {
    kills: options.kills ?? 10,
    postgresRestarts: options.postgresRestarts ?? 1,
    brokerRestarts: options.brokerRestarts ?? 1,
    secondHost: options.secondHost ?? true,
  };
  const random = createRandom(options.seed);
  const workload = generateWorkload(options.seed, options.messages);
  const schedule = scheduleFaults(plan, random.fork('faults'));
  const targets = random.fork('targets');
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), `storage-consumer-chaos-${options.seed}-`)));
  log(`seed ${options.seed}: ${workload.messages.length} messages, ${schedule.length} faults scheduled; work folder ${workDir}`);
  const unmodelled = PIPELINE_NAMES.filter((name) => !CHAOS_PIPELINES.includes(name));
  if (unmodelled.length > 0)
    log(`NOT EXERCISED: ${unmodelled.join(', ')} (no chaos model of the table in chaos/stored-rows.ts); they run with no messages`);

  let broker: ChaosBroker | undefined;
  let database: ChaosDatabase | undefined;
  let kafka: ChaosKafka | undefined;
  let fleet: HostFleet | undefined;
  let pool: pg.Pool | undefined;
  let guardian: RunGuardian | undefined;
  let passed = false;
  try {
    // PostgreSQL runs as its own user (the machine may run us as root): it must reach its folder.
    await chmod(workDir, 0o755);
    guardian = startRunGuardian(workDir);
    const started = await Promise.allSettled([
      startChaosDatabase(join(workDir, 'postgres')),
      startChaosBroker(join(workDir, 'kafka'), () => undefined),
    ]);
    if (started[0].status === 'fulfilled') database = started[0].value;
    if (started[1].status === 'fulfilled') broker = started[1].value;
    for (const outcome of started) if (outcome.status === 'rejected') throw outcome.reason;
    if (database === undefined || broker === undefined) throw new Error('unreachable: a server neither started nor failed');
    log(`own PostgreSQL at ${database.url.replace(/\/\/[^@]*@/, '//')}, own Kafka broker at ${broker.brokers.join(',')}`);
    await prepareChaosDatabase(database.url, workload);
    await ensureTopics(
      broker.brokers,
      PIPELINE_NAMES.map((name) => ({ topic: TOPICS[name], partitions: 3 })),
      { logger: { info: () => undefined, warn: log } },
    );
    kafka = new ChaosKafka(broker.brokers);
    pool = new pg.Pool({ connectionString: database.url, max: 2, connectionTimeoutMillis: 5_000 });
    pool.on('error', () => undefined);
    const watch = new ReviewWatch();
    const observe = async () => {
      if (pool) await watch.observe(pool).catch(() => undefined);
    };

    const brokers = broker.brokers;
    const databaseUrl = database.url;
    const recordHost = guardian.recordHost;
    fleet = new HostFleet((name) => hostEnvironment(name, brokers, databaseUrl, workDir, GROUPS), workDir, log, recordHost);
    const first = await fleet.start('a');
    log(`host a started: pid ${first.pid} is "${first.commandLine}"`);

    // ---- produce, paced to consumption, injecting each fault when its moment comes --------------
    const total = workload.messages.length;
    const chunkSize = Math.max(200, Math.min(1_000, Math.ceil(total / 100)));
    const maxLag = 2 * chunkSize;
    const stallTimeoutMs = options.stallTimeoutMs ?? 180_000;
    let stalled = false;
    const waitForLag = async (limit: number): Promise<void> => {
      let best = Number.POSITIVE_INFINITY;
      let bestAt = Date.now();
      for (;;) {
        const lag = await kafka!.lag(GROUPS);
        if (lag <= limit) return;
        if (lag < best) {
          best = lag;
          bestAt = Date.now();
        } else if (Date.now() - bestAt > stallTimeoutMs) {
          stalled = true;
          log(`STALLED: ${lag} records not committed and no progress for ${stallTimeoutMs / 1000} s`);
          return;
        }
        await sleep(250);
      }
    };

    const events: FaultEvent[] = [];
    const cluster = { fleet, database, broker, targets };
    const inject = async (fault: ScheduledFault): Promise<void> => {
      await sleep(fault.delayMs);
      await observe();
      const at = elapsed();
      const detail = await injectFault(fault.kind, cluster);
      events.push({ kind: fault.kind, at: fault.at, elapsedS: at, detail });
      log(`fault ${events.length}/${schedule.length} at ${(fault.at * 100).toFixed(1)}% produced: ${detail}`);
    };

    // A fault comes right after a burst of messages, so that it meets batches in flight; one
    // fault per burst, so that the hosts get back to work between two faults.
    const burst = Math.max(3 * chunkSize, 1_500);
    let produced = 0;
    let next = 0;
    let reported = 0;
    while (produced < total && !stalled) {
      await waitForLag(maxLag);
      const due = next < schedule.length && (schedule[next] as ScheduledFault).at <= (produced + chunkSize) / total;
      const chunk = workload.messages.slice(produced, produced + (due ? burst : chunkSize));
      await kafka.produce(chunk, TOPICS);
      produced += chunk.length;
      if (due) await inject(schedule[next++] as ScheduledFault);
      if (produced - reported >= total / 10 || produced === total) {
        reported = produced;
        await observe();
        log(`${produced}/${total} produced`);
      }
    }
    while (next < schedule.length && !stalled) await inject(schedule[next++] as ScheduledFault);
    log(`all ${total} messages produced; waiting for the groups to commit to the end`);
    if (!stalled) await waitForLag(0);
    await observe();
    const finalExits = await fleet.stopAll();
    log(`hosts stopped: ${finalExits.map((exit) => `${exit.name} exit code ${String(exit.code)}`).join(', ')}`);

    // ---- check ----------------------------------------------------------------------------------
    const records = await kafka.readBack(TOPICS);
    const expected = expectedState(workload, records);
    const databaseCheck = await checkDatabase(pool, expected);
    const offsets = await checkCommittedOffsets(await kafka.adminClient(), GROUPS);
    const verdict = await watch.verify(pool);
    const hostLogs = await countHostLogs(workDir);
    const byTopic = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, 0])) as Record<PipelineName, number>;
    const byLabel: Record<string, number> = {};
    for (const message of workload.messages) {
      byTopic[message.topic] += 1;
      const label = message.label.startsWith('poison: ') ? message.label.replace(/ \(.*\)$/, '') : message.label;
      byLabel[label] = (byLabel[label] ?? 0) + 1;
    }
    const wrong = databaseCheck.wrong + verdict.moved.length + verdict.overwritten.length;
    const dlqMismatched = databaseCheck.dlqMissing + databaseCheck.dlqUnexpected + databaseCheck.dlqWrong;
    const reconciled = options.reconcile === true ? await reconcileRun(broker.brokers, database.url, log) : undefined;
    const selfTest = options.selfTest === false ? undefined : await checkerSelfTest(pool, expected, watch);
    if (selfTest)
      log(
        `checker self-test ${selfTest.passed ? 'passed' : 'FAILED'}: damage ${JSON.stringify(selfTest.expected)}, reported ${JSON.stringify(selfTest.reported)}`,
      );
    passed =
      !stalled &&
      databaseCheck.lost === 0 &&
      databaseCheck.duplicated === 0 &&
      wrong === 0 &&
      dlqMismatched === 0 &&
      offsets.gaps.length === 0 &&
      (reconciled === undefined ||
        (reconciled.code === 0 &&
          reconciled.jsonCode === 0 &&
          reconciled.deadLettered + reconciled.letterGone === databaseCheck.dlqExpected)) &&
      selfTest?.passed !== false;
    const summary: ChaosSummary = {
      messages: workload.messages.length,
      faults: events.length,
      lost: databaseCheck.lost,
      duplicated: databaseCheck.duplicated,
      wrong,
      dlq_expected: databaseCheck.dlqExpected,
      dlq_found: databaseCheck.dlqFound,
      seed: options.seed,
      kafka_client: chaosKafkaClient().KAFKA_CLIENT ?? 'kafkajs',
      elapsed_s: Math.round(elapsed()),
      dlq_mismatched: dlqMismatched,
      offsets_behind: offsets.gaps.length,
      ...(reconciled === undefined
        ? {}
        : { reconcile_missing: reconciled.missing, reconcile_wrong: reconciled.wrong, reconcile_dead_lettered: reconciled.deadLettered }),
      passed,
    };
    return {
      summary,
      workload: { byTopic, byLabel, recordsInLog: records.length },
      faults: events,
      database: databaseCheck,
      offsetGaps: offsets.gaps,
      partitionsChecked: offsets.partitions,
      watch: { observed: watch.observed, scored: watch.scoredCount, moved: verdict.moved, overwritten: verdict.overwritten },
      unexpectedExits: fleet.unexpectedExits,
      finalExits,
      hostLogs,
      stalled,
      selfTest,
      reconcile: reconciled,
      workDir,
      workDirKept: !passed || options.keep === true,
    };
  } finally {
    await fleet?.stopAll().catch(() => undefined);
    await kafka?.close();
    await pool?.end().catch(() => undefined);
    await Promise.allSettled([broker?.stop(), database?.stop()]);
    guardian?.dismiss();
    if (passed && options.keep !== true) await rm(workDir, { recursive: true, force: true });
  }
}
