/**
 * The settings catalog: every setting declared once, every read of the environment going
 * through a declaration, the Lambda path reading no host-only variable, and every invalid
 * setting named at once.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ALL_SETTINGS,
  catalogEntries,
  catalogVariables,
  CROSS_CONSTRAINTS,
  SETTING_FAMILIES,
} from '../../../config/setting-declarations.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import { ConfigurationError } from '../../../shared/errors.js';
import { PIPELINE_NAMES } from '../../../shared/pipelines.js';
import { SettingsReader } from '../../../shared/setting.js';
import { readSettings } from '../../../shared/settings.js';
import { loadSettings } from '../../../shared/settings.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The product's source: what runs on Lambda, in the host and in the CLI, and the deployment's generators. */
const PRODUCT_FOLDERS = ['shared', 'config', 'host', 'host-api', 'kafka', 'invoke', 'cli', 'aws', 'handlers', 'deploy', 'bin'];

function productFiles(): string[] {
  return PRODUCT_FOLDERS.flatMap((folder) =>
    readdirSync(join(ROOT, folder), { recursive: true })
      .map(String)
      .filter((file) => /\.(ts|js)$/.test(file))
      .map((file) => join(folder, file)),
  );
}

/** Lines of `file` matching `pattern`, as `path:line: text`. */
function matches(file: string, pattern: RegExp): string[] {
  return readFileSync(join(ROOT, file), 'utf8')
    .split('\n')
    .flatMap((line, index) => (pattern.test(line) ? [`${relative(ROOT, join(ROOT, file))}:${index + 1}: ${line.trim()}`] : []));
}

function errorOf(work: () => unknown): ConfigurationError {
  try {
    work();
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

describe('the declarations', () => {
  const variables = catalogVariables();

  it('declare every variable once, each with runtimes, a description and a tier', () => {
    const names = variables.map((declared) => declared.name);
    expect(new Set(names).size).toBe(names.length);
    for (const declared of variables) {
      expect(declared.runtimes.length, declared.name).toBeGreaterThan(0);
      expect(declared.description.length, declared.name).toBeGreaterThan(10);
      expect(declared.description, declared.name).not.toContain('\n');
    }
  });

  it('state the unit a name implies, and a unit for every timer', () => {
    for (const declared of variables) {
      if (declared.name.endsWith('_MS')) expect(declared.unit, declared.name).toBe('ms');
      if (declared.name.endsWith('_S')) expect(declared.unit, declared.name).toBe('s');
      if (declared.name.endsWith('_BYTES')) expect(declared.unit, declared.name).toBe('bytes');
    }
    expect(variables.filter((declared) => declared.unit === 's').map((declared) => declared.name)).toEqual(['STORAGE_APP_CACHE_TTL_S']);
  });

  it('give bytes and milliseconds their own bounds messages', () => {
    const error = errorOf(() => loadHostSettings({ KAFKA_BROKERS: 'b:9092', STORAGE_MAX_EVENT_BYTES: '10', STORAGE_LAG_TIMEOUT_MS: '1' }));
    expect(error.problems).toEqual([
      'STORAGE_MAX_EVENT_BYTES="10" is invalid: must be from 1024 to 6291456 bytes',
      'STORAGE_LAG_TIMEOUT_MS="1" is invalid: must be from 100 to 600000 ms',
    ]);
  });

  it('mark about ten entries common, listed first', () => {
    const entries = catalogEntries();
    const common = entries.filter((entry) => entry.tier === 'common');
    expect(common.length).toBeGreaterThanOrEqual(8);
    expect(common.length).toBeLessThanOrEqual(14);
    expect(entries.slice(0, common.length)).toEqual(common);
  });

  it('declare each per-pipeline family once, one member per pipeline, with the spec as default', () => {
    for (const family of SETTING_FAMILIES) {
      expect(family.name).toMatch(/_<PIPELINE>$/);
      const members = variables.filter((declared) => declared.family === family.name).map((declared) => declared.name);
      expect(members).toEqual(PIPELINE_NAMES.map((name) => family.of(name).name));
    }
    expect(variables.find((declared) => declared.name === 'STORAGE_MAX_POLL_RECORDS_REVIEWS')?.fallback).toBe(500);
  });

  it('keep each rule beside settings of the catalog', () => {
    const names = new Set(variables.map((declared) => declared.name));
    for (const constraint of CROSS_CONSTRAINTS) {
      for (const declared of constraint.settings) expect(names.has(declared.name), constraint.rule).toBe(true);
    }
  });
});

describe('every read of the environment goes through a declaration', () => {
  it('has no process.env.X or env.X read of a variable outside the reader', () => {
    // Reading one variable by name (process.env.STORAGE_ACTOR, io.env.STORAGE_MIGRATIONS_DIR,
    // env['KAFKA_BROKERS']) bypasses the declarations; passing the environment whole is fine.
    const strayRead = /\benv\s*(\?\.|\.)\s*[A-Z][A-Z0-9_]*\b|\benv\s*\[\s*['"`]/;
    // The platform's own variables, read as such: not settings of this product.
    const platform = /\benv\.(IS_LOCAL|USER|LOGNAME|PATH)\b/;
    const stray = productFiles()
      .flatMap((file) => matches(file, strayRead))
      .filter((line) => !platform.test(line));
    expect(stray).toEqual([]);
  });

  it('uses process.env only whole (a default parameter, a child environment)', () => {
    const stray = productFiles().flatMap((file) => matches(file, /process\.env\b(?!\s*[,;)}]|\s*$)/));
    expect(stray.filter((line) => !/\.\.\.process\.env/.test(line))).toEqual([]);
  });

  it('names no variable the catalog does not declare', () => {
    const known = new Set([
      ...catalogVariables().map((declared) => declared.name),
      ...SETTING_FAMILIES.map((family) => family.name.replace(/_<PIPELINE>$/, '')),
    ]);
    // Code constants that look like variables.
    const constants = new Set(['KAFKA_CODECS', 'KAFKA_EVENT_SOURCES']);
    const unknown = productFiles().flatMap((file) =>
      [...readFileSync(join(ROOT, file), 'utf8').matchAll(/\b(?:STORAGE|KAFKA|POWERTOOLS)_[A-Z0-9_]*[A-Z0-9]\b/g)]
        .map((match) => match[0])
        .filter((name) => !known.has(name) && !constants.has(name))
        .map((name) => `${file}: ${name}`),
    );
    expect(unknown).toEqual([]);
  });

  it('finds a stray read when there is one (the pattern itself is tested)', () => {
    const strayRead = /\benv\s*(\?\.|\.)\s*[A-Z][A-Z0-9_]*\b|\benv\s*\[\s*['"`]/;
    expect(strayRead.test('const named = env.STORAGE_ACTOR?.trim();')).toBe(true);
    expect(strayRead.test("const dir = process.env['STORAGE_MIGRATIONS_DIR'];")).toBe(true);
    expect(strayRead.test('const settings = loadSettings(io.env);')).toBe(false);
  });
});

describe('the Lambda path', () => {
  it('reads only settings declared for Lambda', () => {
    const reader = new SettingsReader({});
    readSettings(reader);
    const names = reader.readings().map((reading) => reading.setting.name);
    expect(names.length).toBeGreaterThan(5);
    for (const reading of reader.readings()) expect(reading.setting.runtimes, reading.setting.name).toContain('lambda');
  });

  it('ignores the host-only variables, even invalid ones', () => {
    const settings = loadSettings({ STORAGE_PIPELINES: 'nope', STORAGE_MAX_POLL_RECORDS_REVIEWS: 'many', STORAGE_TOPIC_REVIEWS: ' ' });
    expect(Object.keys(settings).sort()).toEqual(['applicationCacheTtlMs', 'database', 'failureResponse', 'rejectionLogLimit', 'retry']);
  });

  it('declares every variable the deployment sets on the functions as read by Lambda', () => {
    const serverless = readFileSync(join(ROOT, 'serverless.yml'), 'utf8');
    const environment = serverless.slice(serverless.indexOf('  environment:'), serverless.indexOf('\npackage:'));
    // Node's own (NODE_OPTIONS, NODE_EXTRA_CA_CERTS) apart.
    const set = [...environment.matchAll(/^ {4}([A-Z][A-Z0-9_]+):/gm)]
      .map((match) => match[1])
      .filter((name) => !name?.startsWith('NODE_'));
    const resources = readFileSync(join(ROOT, 'deploy/resources.js'), 'utf8');
    set.push(...[...resources.matchAll(/environment: \{ ([A-Z][A-Z0-9_]+):/g)].map((match) => match[1]));
    expect(set).toContain('STORAGE_DB_SECRET_ID');
    expect(set).toContain('STORAGE_FAILURE_RESPONSE');
    for (const name of set) {
      expect(ALL_SETTINGS.find((declared) => declared.name === name)?.runtimes, name).toContain('lambda');
    }
  });
});

describe('start-up validation', () => {
  it('names every invalid setting at once, as one ConfigurationError', () => {
    const error = errorOf(() =>
      loadHostSettings({
        STORAGE_DB_POOL_MAX: '0',
        STORAGE_SESSION_TIMEOUT_MS: '500',
        STORAGE_FETCH_UNREADY_AFTER_MS: '60000',
        STORAGE_FETCH_FAIL_AFTER_MS: '60000',
        STORAGE_PIPELINES: 'reviews,logs',
      }),
    );
    expect(error.problems).toHaveLength(5);
    expect(error.message).toMatch(/^5 invalid settings: /);
    for (const name of [
      'STORAGE_DB_POOL_MAX',
      'STORAGE_SESSION_TIMEOUT_MS',
      'STORAGE_FETCH_FAIL_AFTER_MS=60000',
      'logs',
      'KAFKA_BROKERS',
    ]) {
      expect(error.message).toContain(name);
    }
  });

  it('names two broken rules that share a setting', () => {
    const error = errorOf(() =>
      loadHostSettings({
        KAFKA_BROKERS: 'b:9098',
        KAFKA_SSL: 'false',
        KAFKA_SSL_CA_FILE: '/etc/hostname',
        KAFKA_SASL_MECHANISM: 'aws-msk-iam',
        KAFKA_AWS_REGION: 'eu-central-1',
      }),
    );
    expect(error.problems).toEqual([
      'KAFKA_SSL_CA_FILE is set but KAFKA_SSL=false; unset one of them',
      'KAFKA_SSL=false but KAFKA_SASL_MECHANISM=aws-msk-iam needs TLS (MSK serves IAM on its TLS port 9098)',
    ]);
  });

  it('keeps the message of a single problem as it was', () => {
    const error = errorOf(() => loadSettings({ STORAGE_DB_RETRY_ATTEMPTS: '21' }));
    expect(error.problems).toEqual(['STORAGE_DB_RETRY_ATTEMPTS="21" is invalid: must be from 0 to 20']);
    expect(error.message).toBe(error.problems[0]);
  });
});
