/**
 * `storage-consumer config`: every declared setting with its effective value and source,
 * secrets redacted, and exit 2 naming every invalid setting at once.
 */
import { describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.js';
import { redact } from '../../../cli/effective-settings.js';
import type { EffectiveSetting } from '../../../cli/effective-settings.js';
import { catalogVariables } from '../../../config/setting-declarations.js';
import type { Environment } from '../../../shared/env.js';

async function config(env: Environment, ...args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(['config', ...args], {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env,
  });
  return { code, stdout, stderr };
}

async function configJson(env: Environment) {
  const run = await config(env, '--json');
  const parsed = JSON.parse(run.stdout) as { settings: EffectiveSetting[]; problems: string[] };
  const byName = new Map(parsed.settings.map((setting) => [setting.name, setting]));
  return { ...run, ...parsed, byName };
}

const DEV = { DATABASE_URL: 'postgres://postgres:secret@127.0.0.1:5432/sc_test', KAFKA_BROKERS: '127.0.0.1:19092' };

describe('storage-consumer config', () => {
  it('lists every declared variable once, the common ones first, with its source', async () => {
    // Act
    const run = await configJson({ ...DEV, STORAGE_DB_POOL_MAX: '4', STORAGE_MAX_POLL_RECORDS: '100' });

    // Assess
    expect(run.code).toBe(0);
    expect(run.problems).toEqual([]);
    expect(run.settings.map((setting) => setting.name)).toEqual(catalogVariables().map((declared) => declared.name));
    const tiers = run.settings.map((setting) => setting.tier);
    expect(tiers.lastIndexOf('common')).toBeLessThan(tiers.indexOf('advanced'));
    expect(run.byName.get('STORAGE_DB_POOL_MAX')).toMatchObject({ value: '4', source: 'environment', used: true, unit: 'connections' });
    expect(run.byName.get('STORAGE_DB_CONNECT_TIMEOUT_MS')).toMatchObject({ value: '5000', source: 'default', unit: 'ms' });
    expect(run.byName.get('KAFKA_BROKERS')).toMatchObject({ value: '127.0.0.1:19092', source: 'environment' });
    // A default taken from another setting says which.
    expect(run.byName.get('STORAGE_MAX_POLL_RECORDS_REVIEWS')).toMatchObject({
      value: '100',
      source: 'default',
      from: 'STORAGE_MAX_POLL_RECORDS',
    });
    // In-process, the Lambda invoke settings are read by nobody.
    expect(run.byName.get('STORAGE_LAMBDA_REGION')).toMatchObject({ used: false });
  });

  it('prints a table by default, with the unit and source of each value', async () => {
    // Act
    const run = await config({ ...DEV, STORAGE_SESSION_TIMEOUT_MS: '60000' });

    // Assess
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^SETTING +TIER +VALUE +UNIT +SOURCE$/m);
    expect(run.stdout).toMatch(/^STORAGE_SESSION_TIMEOUT_MS +advanced +60000 +ms +environment$/m);
    expect(run.stdout).toMatch(/^STORAGE_APP_CACHE_TTL_S +advanced +300 +s +default$/m);
    expect(run.stderr).toBe('');
  });

  it('redacts the database password, the SASL password and the control token, in the table and in JSON', async () => {
    // Prepare
    const env = {
      ...DEV,
      DATABASE_URL: 'postgres://storage:pa55word@db.internal:5432/storage?sslmode=require',
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'consumer',
      KAFKA_SASL_PASSWORD: 'kafka-s3cret',
      STORAGE_HTTP_CONTROL_TOKEN: '0123456789abcdef-token',
    };

    // Act
    const table = await config(env);
    const json = await configJson(env);

    // Assess
    for (const output of [table.stdout, JSON.stringify(json.settings)]) {
      expect(output).not.toContain('pa55word');
      expect(output).not.toContain('kafka-s3cret');
      expect(output).not.toContain('0123456789abcdef-token');
    }
    expect(json.byName.get('DATABASE_URL')?.value).toBe('postgres://storage:***@db.internal:5432/storage?sslmode=require');
    expect(json.byName.get('KAFKA_SASL_PASSWORD')?.value).toBe('***');
    expect(json.byName.get('STORAGE_HTTP_CONTROL_TOKEN')?.value).toBe('***');
    expect(json.byName.get('KAFKA_SASL_USERNAME')?.value).toBe('consumer');
  });

  it('redacts a password given as a URL parameter, and all of a secret that is not a URL', () => {
    expect(redact('postgres://db.internal/storage?user=storage&password=p%40ss', 'url-password')).toBe(
      'postgres://db.internal/storage?user=storage&password=***',
    );
    expect(redact('host=db password=p', 'url-password')).toBe('***');
    expect(redact('postgres://storage@db.internal/storage', 'url-password')).toBe('postgres://storage@db.internal/storage');
  });

  it('exits 2 naming every invalid setting and every broken rule, never echoing a secret', async () => {
    // Prepare: two bad values, one broken rule, one missing required setting, one bad secret
    const env = {
      DATABASE_URL: DEV.DATABASE_URL,
      STORAGE_DB_POOL_MAX: '0',
      STORAGE_FETCH_UNREADY_AFTER_MS: 'soon',
      STORAGE_FAILURE_RESPONSE: 'report',
      STORAGE_REPORT_BATCH_ITEM_FAILURES: 'false',
      STORAGE_HTTP_CONTROL_TOKEN: 'short secret',
    };

    // Act
    const run = await config(env);
    const json = await configJson(env);

    // Assess
    expect(run.code).toBe(2);
    expect(json.code).toBe(2);
    expect(run.stderr).toContain('storage-consumer config: 5 invalid settings:');
    for (const problem of [
      'STORAGE_DB_POOL_MAX="0" is invalid: must be from 1 to 100 connections',
      'STORAGE_FETCH_UNREADY_AFTER_MS="soon" is invalid: must be a whole number',
      'STORAGE_FAILURE_RESPONSE=report needs STORAGE_REPORT_BATCH_ITEM_FAILURES=true',
      'KAFKA_BROKERS is required but not set',
      'STORAGE_HTTP_CONTROL_TOKEN is invalid: too short (12 characters)',
    ]) {
      expect(run.stderr).toContain(problem);
      expect(json.problems.some((line) => line.includes(problem))).toBe(true);
    }
    expect(run.stderr + run.stdout).not.toContain('short secret');
    expect(run.stdout).toMatch(/^STORAGE_DB_POOL_MAX +advanced +0 +connections +environment: INVALID$/m);
    expect(json.byName.get('STORAGE_DB_POOL_MAX')?.problem).toContain('must be from 1 to 100');
    // The settings of a broken rule are marked too, each valid on its own.
    expect(run.stdout).toMatch(/^STORAGE_REPORT_BATCH_ITEM_FAILURES +advanced +false +- +environment: INVALID$/m);
    expect(json.byName.get('STORAGE_FAILURE_RESPONSE')).toMatchObject({ invalid: true, value: 'report' });
    expect(json.byName.get('STORAGE_FAILURE_RESPONSE')?.problem).toBeUndefined();
    expect(json.byName.get('STORAGE_DB_RETRY_ATTEMPTS')).toMatchObject({ invalid: false });
  });

  it('does not report a rule between settings when one of them is already refused', async () => {
    // Act: the failure bound is not a number, so "fail > unready" cannot be judged
    const run = await configJson({ ...DEV, STORAGE_FETCH_FAIL_AFTER_MS: 'later', STORAGE_FETCH_UNREADY_AFTER_MS: '400000' });

    // Assess
    expect(run.code).toBe(2);
    expect(run.problems).toEqual(['STORAGE_FETCH_FAIL_AFTER_MS="later" is invalid: must be a whole number']);
  });
});
