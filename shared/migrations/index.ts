/**
 * The migration runner (docs/design.md section 7): numbered SQL files applied in order, one transaction
 * each, recorded with their checksums, serialized by an advisory lock.
 */
export { runMigrations } from './run.js';
export { migrationConnection } from './connection.js';
export { schemaStatus, compareWithApplied } from './status.js';
export { loadMigrations, migrationsHash, orderMigrationFileNames, parseMigrationFileName } from './files.js';
export { DEFAULT_MIGRATIONS_DIRECTORY, MIGRATION_LOCK_KEY } from './constants.js';
export type { AppliedMigration, MigrationFile, MigrationLogger, MigrationReport } from './model.js';
