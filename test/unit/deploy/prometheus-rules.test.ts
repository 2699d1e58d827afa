/**
 * The host's Prometheus alert rules (deploy/prometheus/): `promtool check rules` accepts them,
 * `promtool test rules` runs their tests (input series, expected alerts, a planned pause paging
 * nobody and a forgotten one paging), and they name only what the host exports, with the
 * freshness objectives of shared/pipelines.ts. promtool comes with the Debian package
 * `prometheus`: without it (and with `CI` unset) the promtool tests are skipped with one line;
 * with `CI` set its absence fails them (.ci/run installs it).
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createHostMetrics } from '../../../host/metrics.js';
import { PIPELINE_NAMES, PIPELINES } from '../../../shared/pipelines.js';
import { valueForStage } from '../../../shared/stages.js';
import { metricNamesIn } from '../../helpers/promql.js';

const folder = fileURLToPath(new URL('../../../deploy/prometheus/', import.meta.url));
const RULES = 'storage-consumer.rules.yml';
const RULE_TESTS = 'storage-consumer.rules.test.yml';

const CI = (process.env.CI ?? '') !== '' && process.env.CI !== 'false';
const promtool = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/bin']
  .map((directory) => join(directory, 'promtool'))
  .find((candidate) => spawnSync(candidate, ['--version']).status === 0);
if (promtool === undefined && !CI) {
  console.log(
    '[prometheus-rules] promtool not found (PATH, /usr/bin): the promtool tests are skipped; install the Debian package "prometheus"',
  );
}

/** Runs promtool in the rules' folder (the test file names the rules file relative to itself). */
async function runPromtool(...args: string[]): Promise<{ code: number; output: string }> {
  if (promtool === undefined) throw new Error('promtool is not installed (Debian package "prometheus"); .ci/run installs it');
  try {
    const { stdout, stderr } = await promisify(execFile)(promtool, args, { cwd: folder });
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : 1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

/** Every `expr:` of a rules file, single-line or folded (`>-`). */
function expressions(text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  lines.forEach((line, index) => {
    const match = /^(\s*)(?:- )?expr: (.*)$/.exec(line);
    if (!match) return;
    if (match[2] !== '>-') return void found.push(match[2] as string);
    const body: string[] = [];
    for (const next of lines.slice(index + 1)) {
      if (!next.startsWith(`${match[1]}  `) || /^\s*\w+:/.test(next)) break;
      body.push(next.trim());
    }
    found.push(body.join(' '));
  });
  return found;
}

describe.skipIf(promtool === undefined && !CI)('promtool', () => {
  // Each spawns promtool.
  it('checks the rules file: every rule parses', { timeout: 30_000 }, async () => {
    const { code, output } = await runPromtool('check', 'rules', RULES);
    console.log(output.trim());
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(code).toBe(0);
  });

  it('passes the rules tests: each alert fires on its input series, and none for a planned pause', { timeout: 30_000 }, async () => {
    const { code, output } = await runPromtool('test', 'rules', RULE_TESTS);
    console.log(output.trim());
    expect(output).toContain('SUCCESS');
    expect(code).toBe(0);
  });
});

describe('the alert rules', () => {
  it('are each judged in the planned-pause test, so none pages for a planned pause', async () => {
    const rules = await readFile(join(folder, RULES), 'utf8');
    const tests = await readFile(join(folder, RULE_TESTS), 'utf8');
    const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map(([, name]) => name);
    const pauseCase = tests.slice(tests.indexOf('- name: a planned pause'), tests.indexOf('- name: freshness'));
    expect(alerts.length).toBeGreaterThanOrEqual(10);
    for (const alert of alerts) expect(pauseCase, alert).toMatch(new RegExp(`eval_time: 1h,? *\\n?\\s*alertname: ${alert}\\b`));
  });

  it("record each pipeline's prod freshness objective from shared/pipelines.ts", async () => {
    const rules = await readFile(join(folder, RULES), 'utf8');
    const recorded = Object.fromEntries(
      [
        ...rules.matchAll(
          /- record: storage_consumer:freshness_objective_seconds\s+expr: vector\(([\d.]+)\)\s+labels:\s+pipeline: ([\w-]+)/g,
        ),
      ].map(([, seconds, pipeline]) => [pipeline, Number(seconds)]),
    );
    expect(recorded).toEqual(
      Object.fromEntries(PIPELINE_NAMES.map((name) => [name, valueForStage(PIPELINES[name].freshnessObjectiveSeconds, 'prod')])),
    );
  });

  it('name only metrics the host exports (and its own recordings, and up)', async () => {
    const exported = new Set(['up', 'storage_consumer:freshness_objective_seconds']);
    for (const metric of await createHostMetrics(PIPELINE_NAMES).registry.getMetricsAsJSON()) {
      exported.add(metric.name);
      if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${metric.name}${suffix}`);
    }
    // The recordings of the objectives are constants (vector(n)); every alert reads a series.
    const exprs = expressions(await readFile(join(folder, RULES), 'utf8')).filter((expr) => !expr.startsWith('vector('));
    expect(exprs.length).toBeGreaterThanOrEqual(10);
    for (const expr of exprs) {
      const names = metricNamesIn(expr);
      expect(names.length, expr).toBeGreaterThan(0);
      for (const name of names) expect(exported.has(name), `${expr}: ${name}`).toBe(true);
    }
  });
});
