import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { migrationConnection } from '../../../../shared/migrations/index.js';
import { loadSettings } from '../../../../shared/settings.js';
const directories: string[] = [];
afterEach(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('migrationConnection', () => {
  it("keeps the batches' host, TLS and connect timeout, drops their statement timeout, and bounds the lock wait by the setting", () => {
    // Prepare
    const settings = loadSettings({
      DATABASE_URL: 'postgres://migrator@db.internal:5432/storage',
      STORAGE_DB_SSL: 'verify-full',
      STORAGE_DB_CONNECT_TIMEOUT_MS: '1234',
      STORAGE_DB_STATEMENT_TIMEOUT_MS: '30000',
    });

    // Act
    const migration = migrationConnection(settings.database);

    // Assess
    expect(migration.connection).toMatchObject({
      host: 'db.internal',
      user: 'migrator',
      database: 'storage',
      ssl: { rejectUnauthorized: true },
      connectionTimeoutMillis: 1234,
      application_name: 'storage-consumer/migrate',
    });
    expect(migration.connection).not.toHaveProperty('statement_timeout');
    expect(migration.connection).not.toHaveProperty('query_timeout');
    expect(migration).toMatchObject({ statementTimeoutMs: 0, lockTimeoutMs: 600_000 });
  });

  it('takes STORAGE_MIGRATION_LOCK_TIMEOUT_MS, and tighter bounds from a caller with a deadline', () => {
    const settings = loadSettings({ STORAGE_MIGRATION_LOCK_TIMEOUT_MS: '90000' });

    expect(migrationConnection(settings.database).lockTimeoutMs).toBe(90_000);
    expect(migrationConnection(settings.database, { statementTimeoutMs: 5_000, lockTimeoutMs: 5_000 })).toMatchObject({
      statementTimeoutMs: 5_000,
      lockTimeoutMs: 5_000,
    });
    expect(() => loadSettings({ STORAGE_MIGRATION_LOCK_TIMEOUT_MS: 'forever' })).toThrow(/STORAGE_MIGRATION_LOCK_TIMEOUT_MS/);
  });
});
