import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../../shared/errors.js';
import { loadConsumerSettings } from '../../../config/pipeline-settings.js';
import { PIPELINE_NAMES, PIPELINES } from '../../../shared/pipelines.js';

function configurationErrorFrom(env: Record<string, string>): ConfigurationError {
  try {
    loadConsumerSettings(env);
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe('loadSettings defaults', () => {
  it('gives every pipeline its topic, consumer group and batch size from the spec', () => {
    // Act
    const settings = loadConsumerSettings({});

    // Assess: docs/design.md section 1's values for its pipelines, each spec's for every pipeline
    expect(Object.keys(settings.pipelines)).toEqual(PIPELINE_NAMES);
    for (const name of PIPELINE_NAMES) {
      const { topic, group, batchSize } = PIPELINES[name];
      expect(settings.pipelines[name]).toEqual({ name, topic, group, batchSize });
    }
    expect(settings.pipelines).toMatchObject({
      'app-stats': { name: 'app-stats', topic: 'app-stats', group: 'storage-consumer.app-stats', batchSize: 200 },
      reviews: { name: 'reviews', topic: 'reviews', group: 'storage-consumer.reviews', batchSize: 500 },
      'network-metrics': {
        name: 'network-metrics',
        topic: 'network-metrics',
        group: 'storage-consumer.network-metrics',
        batchSize: 50,
      },
    });
    expect(settings.selectedPipelines).toEqual(PIPELINE_NAMES);
  });

  it('uses the documented database, retry, cache and failure defaults', () => {
    // Act
    const settings = loadConsumerSettings({});

    // Assess
    expect(settings.database).toEqual({
      connectionString: undefined,
      connectTimeoutMs: 5_000,
      statementTimeoutMs: 30_000,
      poolMax: 3,
      ssl: undefined,
      preparedStatements: false,
      migrationLockTimeoutMs: 600_000,
    });
    expect(settings.retry).toEqual({ retries: 5, baseMs: 1_000 });
    expect(settings.applicationCacheTtlMs).toBe(300_000);
    expect(settings.failureResponse).toBe('throw');
    expect(settings.rejectionLogLimit).toBe(5);
  });

  it('treats an empty or blank variable as unset', () => {
    // Act
    const settings = loadConsumerSettings({ STORAGE_MAX_POLL_RECORDS: '', STORAGE_DB_RETRY_ATTEMPTS: '   ', DATABASE_URL: '' });

    // Assess
    expect(settings.pipelines.reviews.batchSize).toBe(500);
    expect(settings.retry.retries).toBe(5);
    expect(settings.database.connectionString).toBeUndefined();
  });

  it('reads only the environment it is given', () => {
    // Prepare
    const previous = process.env.STORAGE_MAX_POLL_RECORDS;
    process.env.STORAGE_MAX_POLL_RECORDS = '7';
    try {
      // Act
      const settings = loadConsumerSettings({});

      // Assess
      expect(settings.pipelines.reviews.batchSize).toBe(500);
    } finally {
      if (previous === undefined) delete process.env.STORAGE_MAX_POLL_RECORDS;
      else process.env.STORAGE_MAX_POLL_RECORDS = previous;
    }
  });
});

describe('loadSettings reads every variable', () => {
  it('reads the database, retry, cache, failure and logging variables', () => {
    // Prepare
    const env = {
      DATABASE_URL: 'postgres://storage@db.internal:5433/analytics',
      STORAGE_DB_CONNECT_TIMEOUT_MS: '2500',
      STORAGE_DB_STATEMENT_TIMEOUT_MS: '12000',
      STORAGE_DB_POOL_MAX: '4',
      STORAGE_DB_SSL: 'verify-full',
      STORAGE_DB_PREPARED_STATEMENTS: 'true',
      STORAGE_MIGRATION_LOCK_TIMEOUT_MS: '120000',
      STORAGE_DB_RETRY_ATTEMPTS: '3',
      STORAGE_DB_RETRY_BASE_MS: '20',
      STORAGE_APP_CACHE_TTL_S: '60',
      STORAGE_FAILURE_RESPONSE: 'report',
      STORAGE_REJECTION_LOG_LIMIT: '0',
    };

    // Act
    const settings = loadConsumerSettings(env);

    // Assess
    expect(settings.database).toEqual({
      connectionString: 'postgres://storage@db.internal:5433/analytics',
      connectTimeoutMs: 2_500,
      statementTimeoutMs: 12_000,
      poolMax: 4,
      ssl: 'verify-full',
      preparedStatements: true,
      migrationLockTimeoutMs: 120_000,
    });
    expect(settings.retry).toEqual({ retries: 3, baseMs: 20 });
    expect(settings.applicationCacheTtlMs).toBe(60_000);
    expect(settings.failureResponse).toBe('report');
    expect(settings.rejectionLogLimit).toBe(0);
  });

  it('overrides topic and consumer group per pipeline, leaving the others at their defaults', () => {
    // Act
    const settings = loadConsumerSettings({
      STORAGE_TOPIC_NETWORK_METRICS: 'staging.network-metrics',
      STORAGE_GROUP_NETWORK_METRICS: 'staging.storage-consumer.network-metrics',
      STORAGE_TOPIC_APP_STATS: 'test-run-17.app-stats',
    });

    // Assess
    expect(settings.pipelines['network-metrics'].topic).toBe('staging.network-metrics');
    expect(settings.pipelines['network-metrics'].group).toBe('staging.storage-consumer.network-metrics');
    expect(settings.pipelines['app-stats'].topic).toBe('test-run-17.app-stats');
    expect(settings.pipelines['app-stats'].group).toBe('storage-consumer.app-stats');
    expect(settings.pipelines.reviews).toMatchObject({ topic: 'reviews', group: 'storage-consumer.reviews' });
  });

  it('accepts the cache TTL 0 (no caching) and zero retries', () => {
    // Act
    const settings = loadConsumerSettings({ STORAGE_APP_CACHE_TTL_S: '0', STORAGE_DB_RETRY_ATTEMPTS: '0' });

    // Assess
    expect(settings.applicationCacheTtlMs).toBe(0);
    expect(settings.retry.retries).toBe(0);
  });
});

describe('batch size precedence', () => {
  it.each([
    { env: {}, expected: { 'app-stats': 200, reviews: 500, 'network-metrics': 50 } },
    { env: { STORAGE_MAX_POLL_RECORDS: '100' }, expected: { 'app-stats': 100, reviews: 100, 'network-metrics': 100 } },
    {
      env: { STORAGE_MAX_POLL_RECORDS_REVIEWS: '1000' },
      expected: { 'app-stats': 200, reviews: 1000, 'network-metrics': 50 },
    },
    {
      env: { STORAGE_MAX_POLL_RECORDS: '100', STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS: '5' },
      expected: { 'app-stats': 100, reviews: 100, 'network-metrics': 5 },
    },
    {
      env: { STORAGE_MAX_POLL_RECORDS_APP_STATS: '300', STORAGE_MAX_POLL_RECORDS: '10' },
      expected: { 'app-stats': 300, reviews: 10, 'network-metrics': 10 },
    },
  ])('$env gives $expected', ({ env, expected }) => {
    // Act
    const settings = loadConsumerSettings(env);

    // Assess
    expect({
      'app-stats': settings.pipelines['app-stats'].batchSize,
      reviews: settings.pipelines.reviews.batchSize,
      'network-metrics': settings.pipelines['network-metrics'].batchSize,
    }).toEqual(expected);
  });

  it('refuses a bad general batch size even when every pipeline overrides it', () => {
    // Act
    const error = configurationErrorFrom({
      STORAGE_MAX_POLL_RECORDS: 'many',
      STORAGE_MAX_POLL_RECORDS_APP_STATS: '1',
      STORAGE_MAX_POLL_RECORDS_REVIEWS: '1',
      STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS: '1',
    });

    // Assess
    expect(error.message).toContain('STORAGE_MAX_POLL_RECORDS=');
  });
});

describe('bad values stop start-up with a ConfigurationError naming the variable', () => {
  it.each([
    ['STORAGE_MAX_POLL_RECORDS', '0'],
    ['STORAGE_MAX_POLL_RECORDS', '10001'],
    ['STORAGE_MAX_POLL_RECORDS', '1.5'],
    ['STORAGE_MAX_POLL_RECORDS', '1e3'],
    ['STORAGE_MAX_POLL_RECORDS_REVIEWS', '-5'],
    ['STORAGE_MAX_POLL_RECORDS_APP_STATS', 'two hundred'],
    ['STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS', '0x10'],
    ['STORAGE_DB_CONNECT_TIMEOUT_MS', '50'],
    ['STORAGE_DB_STATEMENT_TIMEOUT_MS', 'soon'],
    ['STORAGE_DB_POOL_MAX', '0'],
    ['STORAGE_DB_SSL', 'true'],
    ['STORAGE_DB_RETRY_ATTEMPTS', '-1'],
    ['STORAGE_DB_RETRY_ATTEMPTS', '21'],
    ['STORAGE_DB_RETRY_BASE_MS', '0'],
    ['STORAGE_APP_CACHE_TTL_S', '86401'],
    ['STORAGE_APP_CACHE_TTL_S', '300s'],
    ['STORAGE_FAILURE_RESPONSE', 'retry'],
    ['STORAGE_FAILURE_RESPONSE', 'THROW'],
    ['STORAGE_REJECTION_LOG_LIMIT', '1001'],
  ])('%s=%j', (name, value) => {
    // Prepare
    const env = { [name]: value };

    // Act
    const error = configurationErrorFrom(env);

    // Assess
    expect(error.name).toBe('ConfigurationError');
    expect(error.message).toContain(`${name}=${JSON.stringify(value)}`);
  });
});

describe('STORAGE_PIPELINES', () => {
  it('selects pipelines, trimming blanks and dropping repeats, in the order given', () => {
    // Act
    const settings = loadConsumerSettings({ STORAGE_PIPELINES: ' reviews , network-metrics,,reviews ' });

    // Assess
    expect(settings.selectedPipelines).toEqual(['reviews', 'network-metrics']);
  });

  it('still knows every pipeline when only some are selected', () => {
    // Act
    const settings = loadConsumerSettings({ STORAGE_PIPELINES: 'reviews' });

    // Assess
    expect(Object.keys(settings.pipelines)).toEqual(PIPELINE_NAMES);
  });

  it('refuses an unknown pipeline, naming the variable and the entry', () => {
    // Act
    const error = configurationErrorFrom({ STORAGE_PIPELINES: 'reviews,app_stats,metrics' });

    // Assess
    expect(error.message).toContain('STORAGE_PIPELINES');
    expect(error.message).toContain('app_stats, metrics');
  });

  it('refuses a list that selects nothing', () => {
    // Act
    const error = configurationErrorFrom({ STORAGE_PIPELINES: ' , ,' });

    // Assess
    expect(error.message).toContain('STORAGE_PIPELINES');
  });
});

describe('the settings object', () => {
  it('is frozen all the way down', () => {
    // Prepare
    const settings = loadConsumerSettings({ STORAGE_PIPELINES: 'reviews' });

    // Act
    const changes = [
      () => {
        (settings as { failureResponse: string }).failureResponse = 'report';
      },
      () => {
        (settings.pipelines.reviews as { batchSize: number }).batchSize = 1;
      },
      () => {
        (settings.database as { poolMax: number }).poolMax = 50;
      },
      () => {
        (settings.selectedPipelines as string[]).push('app-stats');
      },
    ];

    // Assess
    for (const change of changes) expect(change).toThrow(TypeError);
    expect(settings.failureResponse).toBe('throw');
    expect(settings.pipelines.reviews.batchSize).toBe(500);
    expect(settings.database.poolMax).toBe(3);
    expect(settings.selectedPipelines).toEqual(['reviews']);
  });
});
