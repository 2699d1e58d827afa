import { describe, expect, it } from 'vitest';
import { runChaos } from '../../chaos/harness.js';
import { reportLines } from '../../chaos/report.js';
import { REJECTION_REASONS } from '../../shared/records.js';

// The small chaos run of `npm test` (`npm run chaos` is the full one): its own broker and
// PostgreSQL, host processes SIGKILLed mid-batch and restarted, the database and the broker
// crashed and restarted, a second host joining and leaving; then the exact final state.
// The seed is random unless CHAOS_SEED is set; a failure prints it, with the whole report.

const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : Math.floor(Math.random() * 2 ** 31);

describe('chaos (small run)', () => {
  it(
    'loses, duplicates and alters nothing through host kills, a PostgreSQL crash, a broker crash and a second host',
    async () => {
      // Prepare
      const lines: string[] = [];
      // Act
      const result = await runChaos({
        messages: 20_000,
        kills: 3,
        postgresRestarts: 1,
        brokerRestarts: 1,
        secondHost: true,
        seed,
        stallTimeoutMs: 180_000,
        log: (line) => lines.push(line),
      });
      // Assess
      const report = [`seed ${seed}`, ...lines, ...reportLines(result), JSON.stringify(result.summary)].join('\n');
      expect(result.summary, report).toMatchObject({
        messages: 20_000,
        faults: 3 + 1 + 1 + 2,
        lost: 0,
        duplicated: 0,
        wrong: 0,
        dlq_mismatched: 0,
        offsets_behind: 0,
        passed: true,
      });
      expect(result.summary.dlq_found, report).toBe(result.summary.dlq_expected);
      expect(result.selfTest?.passed, report).toBe(true);
      const poisoned = Object.keys(result.workload.byLabel).filter((label) => label.startsWith('poison: '));
      expect(poisoned.map((label) => label.slice('poison: '.length)).sort()).toEqual([...REJECTION_REASONS].sort());
      expect(result.faults.filter((fault) => fault.kind === 'kill-host').every((fault) => fault.detail.includes('host/main.ts'))).toBe(
        true,
      );
      expect(
        result.finalExits.every((exit) => exit.code === 0),
        report,
      ).toBe(true);
    },
    20 * 60_000,
  );
});
