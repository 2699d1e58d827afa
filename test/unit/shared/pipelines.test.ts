import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RECORD_DELAY_BUCKETS } from '../../../host/metrics.js';
import { PIPELINE_NAMES, PIPELINES } from '../../../shared/pipelines.js';
import { STAGES, valueForStage } from '../../../shared/stages.js';

/**
 * Adding a pipeline touches four files: its spec (shared/pipelines.ts), its contract, its
 * migration and its handler entry. The compiler holds the spec's shape; this test finds a missing
 * handler entry or migration, and a sample or spec that contradicts itself.
 */
const root = new URL('../../../', import.meta.url);
const migrations = readdirSync(new URL('migrations/', root))
  .filter((name) => name.endsWith('.sql'))
  .map((name) => readFileSync(new URL(`migrations/${name}`, root), 'utf8'));

/** The columns the migrations give `table`: its CREATE TABLE's and every later ADD COLUMN's. */
function migratedColumns(table: string): Set<string> | undefined {
  let columns: Set<string> | undefined;
  for (const sql of migrations) {
    const create = new RegExp(`CREATE TABLE (?:IF NOT EXISTS )?${table} \\(([\\s\\S]*?)\\n\\);`).exec(sql);
    if (create?.[1] !== undefined) {
      columns = new Set(
        create[1]
          .split('\n')
          .map((line) => /^\s+([a-z_][a-z0-9_]*)\s+[A-Za-z]/.exec(line)?.[1])
          .filter(
            (name): name is string => name !== undefined && !['CONSTRAINT', 'PRIMARY', 'UNIQUE', 'CHECK'].includes(name.toUpperCase()),
          ),
      );
    }
    for (const added of sql.matchAll(new RegExp(`ALTER TABLE ${table} ADD COLUMN (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`, 'g'))) {
      if (added[1] !== undefined) columns?.add(added[1]);
    }
  }
  return columns;
}

describe.each(PIPELINE_NAMES)('pipeline %s', (name) => {
  const spec = PIPELINES[name];

  it('has a handler entry, handlers/<name>.ts, that builds its own handler', () => {
    const entry = readFileSync(new URL(`handlers/${name}.ts`, root), 'utf8');
    expect(entry).toContain(`('${name}')`);
  });

  it('has a migration that creates its table with every column the spec writes', () => {
    const columns = migratedColumns(spec.table.name);
    expect(columns, `no migration creates table ${spec.table.name}`).toBeDefined();
    const missing = spec.table.columns.map((column) => column.name).filter((column) => !columns?.has(column));
    expect(missing).toEqual([]);
  });

  it('keys, de-duplicates and updates only over columns it writes', () => {
    const written = new Set(spec.table.columns.map((column) => column.name));
    expect(spec.table.conflictColumns.filter((column) => !written.has(column))).toEqual([]);
    expect((spec.table.update?.columns ?? []).filter((column) => !written.has(column))).toEqual([]);
  });

  it('decodes its own sample message (the sample events and the tests start from it)', () => {
    const result = spec.decode(Buffer.from(JSON.stringify(spec.sample())));
    expect(result.ok ? 'decoded' : result.rejection).toBe('decoded');
  });

  it('has a batch size a mapping accepts, pollers in order and a lag threshold on every stage', () => {
    expect(spec.batchSize).toBeGreaterThanOrEqual(1);
    expect(spec.batchSize).toBeLessThanOrEqual(10_000);
    expect(spec.lambda.pollers.minimum).toBeLessThanOrEqual(spec.lambda.pollers.maximum);
    for (const stage of STAGES) expect(valueForStage(spec.lagAlarmThreshold, stage)).toBeGreaterThan(0);
  });

  it("has a freshness objective on every stage that is one of the host's histogram buckets", () => {
    const buckets: readonly number[] = RECORD_DELAY_BUCKETS;
    for (const stage of STAGES) {
      const objective = valueForStage(spec.freshnessObjectiveSeconds, stage);
      expect(buckets.includes(objective), `${stage}: ${objective} s`).toBe(true);
    }
  });
});

it('names every pipeline once, each with its own topic, group and table', () => {
  for (const key of ['name', 'topic', 'group'] as const) {
    expect(new Set(PIPELINE_NAMES.map((name) => PIPELINES[name][key])).size).toBe(PIPELINE_NAMES.length);
  }
  expect(new Set(PIPELINE_NAMES.map((name) => PIPELINES[name].table.name)).size).toBe(PIPELINE_NAMES.length);
});
