/**
 * Where the schema stands against the migration files, without changing anything: the applied rows,
 * the pending versions, changed or renamed files, and versions newer than the code. run.ts decides
 * with it what to apply; `storage-consumer verify` reports it.
 */
import { DEFAULT_MIGRATIONS_DIRECTORY } from './constants.js';
import { loadMigrations } from './files.js';
import { readAppliedMigrations } from './tracking.js';
import type { Queryable } from './tracking.js';
import type { AppliedMigration, MigrationFile, MigrationMismatch, SchemaStatus } from './model.js';

/** Compares the migration files with the tracking table's rows. Pure. */
export function compareWithApplied(files: readonly MigrationFile[], applied: readonly AppliedMigration[]): SchemaStatus {
  const byVersion = new Map(applied.map((row) => [row.version, row]));
  const known = new Set(files.map((file) => file.version));
  const pending: number[] = [];
  const mismatches: MigrationMismatch[] = [];
  for (const file of files) {
    const row = byVersion.get(file.version);
    if (!row) {
      pending.push(file.version);
    } else if (row.checksum !== file.checksum) {
      mismatches.push({
        version: file.version,
        fileName: file.fileName,
        field: 'checksum',
        expected: row.checksum,
        actual: file.checksum,
      });
    } else if (row.name !== file.name) {
      mismatches.push({
        version: file.version,
        fileName: file.fileName,
        field: 'name',
        expected: row.name,
        actual: file.name,
      });
    }
  }
  const unknownApplied = applied.map((row) => row.version).filter((version) => !known.has(version));
  return {
    applied,
    pending,
    mismatches,
    unknownApplied,
    upToDate: pending.length === 0 && mismatches.length === 0,
  };
}

/**
 * The schema's migration status, without applying or creating anything: applied rows, pending
 * versions, changed files and versions newer than the code. For `verify` and health checks.
 */
export async function schemaStatus(client: Queryable, options: { directory?: string } = {}): Promise<SchemaStatus> {
  const files = await loadMigrations(options.directory ?? DEFAULT_MIGRATIONS_DIRECTORY);
  return compareWithApplied(files, await readAppliedMigrations(client));
}

/** One line per mismatch, naming the file, for error messages. */
export function describeMismatches(mismatches: readonly MigrationMismatch[]): string {
  return mismatches
    .map((mismatch) =>
      mismatch.field === 'checksum'
        ? `${mismatch.fileName} was changed after it was applied ` + `(checksum ${mismatch.expected} applied, ${mismatch.actual} on disk)`
        : `${mismatch.fileName} was renamed after it was applied (applied as "${mismatch.expected}")`,
    )
    .join('; ');
}
