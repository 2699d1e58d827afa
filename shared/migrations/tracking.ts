/**
 * The tracking table `storage_consumer_migrations` (docs/design.md section 7): created when it is
 * missing, read in version order, and given one row per file inside that file's own transaction.
 */
import type pg from 'pg';
import { TRACKING_TABLE } from './constants.js';
import type { AppliedMigration } from './model.js';

/** Something that runs a query: a dedicated client, or a pool for read-only checks. */
export type Queryable = pg.ClientBase | pg.Pool;

/** Creates the tracking table when it is missing (in the first schema of the search path). */
export async function ensureTrackingTable(client: Queryable): Promise<void> {
  await client.query(`
    CREATE TABLE IF NOT EXISTS ${TRACKING_TABLE} (
      version    INTEGER PRIMARY KEY,
      name       TEXT NOT NULL,
      checksum   TEXT NOT NULL,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
}

/** The tracking table's rows in version order; none when the table does not exist yet. */
export async function readAppliedMigrations(client: Queryable): Promise<AppliedMigration[]> {
  const exists = await client.query<{ table: string | null }>('SELECT to_regclass($1)::text AS table', [TRACKING_TABLE]);
  if (!exists.rows[0]?.table) {
    return [];
  }
  const result = await client.query<{ version: number; name: string; checksum: string; applied_at: Date }>(
    `SELECT version, name, checksum, applied_at FROM ${TRACKING_TABLE} ORDER BY version`,
  );
  return result.rows.map((row) => ({
    version: row.version,
    name: row.name,
    checksum: row.checksum,
    appliedAt: row.applied_at,
  }));
}

/** Records a migration as applied; run inside the migration's own transaction. */
export async function recordAppliedMigration(
  client: pg.ClientBase,
  migration: { version: number; name: string; checksum: string },
): Promise<void> {
  await client.query(`INSERT INTO ${TRACKING_TABLE} (version, name, checksum) VALUES ($1, $2, $3)`, [
    migration.version,
    migration.name,
    migration.checksum,
  ]);
}
