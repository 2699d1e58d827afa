import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChaosResult } from './harness.js';

/** Host log messages worth counting in the report (what the faults made the hosts do). */
const HOST_LOG_MESSAGES: Record<string, string> = {
  'transient database error; retrying the batch on a fresh connection': 'database retries',
  'batch not stored; handing it back for redelivery': 'batches handed back',
  'batch not stored; redelivering it after a back-off': 'redeliveries',
  'the database refused a row the decoder accepted; isolating it': 'refused rows isolated',
  'joined the consumer group': 'group joins',
  'offset commit failed; the rows are stored, so a redelivery would only repeat them': 'failed commits',
  'kafka consumer crashed on a retriable error; restarting it': 'consumer restarts',
  'pipeline failed': 'pipelines failed',
};

/** Counts the notable lines of every host log in `dir`, by what they mean. */
export async function countHostLogs(dir: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const file of (await readdir(dir)).filter((name) => name.startsWith('host-'))) {
    for (const line of (await readFile(join(dir, file), 'utf8')).split('\n')) {
      const match = /"message":"([^"]*)"/.exec(line);
      const label = match ? HOST_LOG_MESSAGES[match[1] as string] : undefined;
      if (label !== undefined) counts[label] = (counts[label] ?? 0) + 1;
    }
  }
  return counts;
}

/**
 * The human part of the report (the JSON summary follows it as the last line): the workload,
 * every fault as it happened, what the hosts did about them, and the verdict per table.
 */
export function reportLines(result: ChaosResult): string[] {
  const { summary, workload, database } = result;
  const lines: string[] = [];
  lines.push('');
  lines.push(
    `== chaos run, seed ${summary.seed}, Kafka client ${summary.kafka_client}: ${summary.passed ? 'PASSED' : 'FAILED'} in ${summary.elapsed_s} s`,
  );
  lines.push(
    `workload: ${summary.messages} messages (${Object.entries(workload.byTopic)
      .map(([topic, count]) => `${topic} ${count}`)
      .join(', ')}); ${workload.recordsInLog} records in the log`,
  );
  for (const [label, count] of Object.entries(workload.byLabel).sort(([a], [b]) => a.localeCompare(b))) lines.push(`  ${label}: ${count}`);
  lines.push(`faults injected: ${result.faults.length}`);
  for (const fault of result.faults)
    lines.push(`  [${fault.elapsedS.toFixed(1)} s, ${(fault.at * 100).toFixed(1)}% produced] ${fault.kind}: ${fault.detail}`);
  if (result.unexpectedExits.length > 0) {
    lines.push(`host processes that stopped by themselves and were restarted: ${result.unexpectedExits.length}`);
    for (const exit of result.unexpectedExits)
      lines.push(`  host ${exit.name} pid ${exit.pid}: code ${String(exit.code)}, signal ${String(exit.signal)} (${exit.logFile})`);
  }
  lines.push(
    `final stop: ${result.finalExits.map((exit) => `host ${exit.name} exit code ${String(exit.code)}`).join(', ') || 'no host running'}`,
  );
  lines.push(
    `the hosts logged: ${
      Object.entries(result.hostLogs)
        .map(([label, count]) => `${label} ${count}`)
        .join(', ') || 'nothing notable'
    }`,
  );
  lines.push('check:');
  for (const table of database.tables) {
    lines.push(
      `  ${table.table}: expected ${table.expected} rows, found ${table.found}; lost ${table.lost}, duplicated ${table.duplicated}, wrong ${table.wrong}`,
    );
  }
  lines.push(
    `  dead_letter_events: expected ${database.dlqExpected}, found ${database.dlqFound}; missing ${database.dlqMissing}, unexpected ${database.dlqUnexpected}, wrong reason ${database.dlqWrong}`,
  );
  lines.push(`  reviews.first_seen_at: ${result.watch.observed} noted during the run, ${result.watch.moved.length} moved since`);
  lines.push(`  reviews.sentiment: ${result.watch.scored} written by the watch, ${result.watch.overwritten.length} changed since`);
  lines.push(
    result.offsetGaps.length === 0
      ? `  committed offsets: all ${result.partitionsChecked} partitions of the 3 groups at their end`
      : `  committed offsets: ${result.offsetGaps.length} of ${result.partitionsChecked} partitions behind: ${result.offsetGaps.map((gap) => `${gap.topic}-${gap.partition} ${gap.committed}/${gap.end}`).join(', ')}`,
  );
  if (result.reconcile) {
    lines.push(
      `  storage-consumer reconcile --from earliest: exit ${result.reconcile.code}; missing ${result.reconcile.missing}, wrong ${result.reconcile.wrong}, ` +
        `dead letters accounted for ${result.reconcile.deadLettered} (letters gone ${result.reconcile.letterGone}) of ${database.dlqExpected} expected`,
    );
    lines.push(
      '  $ storage-consumer reconcile --from earliest',
      ...result.reconcile.text
        .trimEnd()
        .split('\n')
        .map((line) => `  ${line}`),
    );
    lines.push(
      '  $ storage-consumer reconcile --from earliest --json',
      ...result.reconcile.json
        .trimEnd()
        .split('\n')
        .map((line) => `  ${line}`),
    );
  }
  if (result.selfTest) {
    lines.push(
      `  checker self-test (damage done after the check): ${result.selfTest.passed ? 'every damage reported' : 'FAILED'}: expected ${JSON.stringify(result.selfTest.expected)}, reported ${JSON.stringify(result.selfTest.reported)}`,
    );
  }
  if (result.stalled) lines.push('  the run STALLED: records stayed uncommitted past the stall timeout');
  for (const example of [...database.examples, ...result.watch.moved.slice(0, 5), ...result.watch.overwritten.slice(0, 5)])
    lines.push(`  ! ${example}`);
  if (result.workDirKept) lines.push(`work folder kept: ${result.workDir}`);
  return lines;
}
