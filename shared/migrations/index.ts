/**
 * The migration runner (docs/design.md section 7): numbered SQL files applied in order, one transaction
 * each, recorded with their checksums, serialized by an advisory lock.
 */
export { runMigrations } from './run.js';
export { MIGRATION_APPLICATION_NAME, migrationConnection } from './connection.js';
export type { MigrationConnection } from './connection.js';
export type { RunMigrationsOptions } from './run.js';
export { schemaStatus, compareWithApplied } from './status.js';
export { loadMigrations, migrationsHash, orderMigrationFileNames, parseMigrationFileName } from './files.js';
export type { MigrationFileName } from './files.js';
export { checksumOf, hashMigrationSet } from './checksum.js';
export { DEFAULT_MIGRATIONS_DIRECTORY, MIGRATION_LOCK_KEY, TRACKING_TABLE } from './constants.js';
export type {
  AppliedMigration,
  MigrationFile,
  MigrationLogger,
  MigrationMismatch,
  MigrationReport,
  SchemaStatus,
} from './types.js';
