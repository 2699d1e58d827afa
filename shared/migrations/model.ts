/**
 * The migration runner's data: a file as read from disk, a tracking-table row, the status of a
 * schema against the files, and a run's report and logger.
 */

/** One migration file as read from disk: its number, name, bytes' checksum and SQL text. */
export interface MigrationFile {
  /** The file's number, `NNNN` in `NNNN_name.sql`; contiguous from 1. */
  readonly version: number;
  /** The part between `NNNN_` and `.sql`; stored in the tracking table's `name`. */
  readonly name: string;
  /** The file's base name, e.g. `0001_app_stats.sql`: what error messages show. */
  readonly fileName: string;
  /** Absolute path of the file. */
  readonly path: string;
  /** sha256 hex of the file's bytes. */
  readonly checksum: string;
  /** The file's text (UTF-8, without a byte order mark). */
  readonly sql: string;
}

/** A row of `storage_consumer_migrations`. */
export interface AppliedMigration {
  readonly version: number;
  readonly name: string;
  readonly checksum: string;
  readonly appliedAt: Date;
}

/** An applied migration whose file no longer matches what was applied. */
export interface MigrationMismatch {
  readonly version: number;
  readonly fileName: string;
  /** `checksum`: the file's bytes changed; `name`: the file was renamed. */
  readonly field: 'checksum' | 'name';
  readonly expected: string;
  readonly actual: string;
}

/** The database's schema compared with the migration files, without applying anything. */
export interface SchemaStatus {
  /** Rows of the tracking table, in version order (empty when the table does not exist). */
  readonly applied: readonly AppliedMigration[];
  /** Versions the code knows and the database has not applied, in order. */
  readonly pending: readonly number[];
  /** Applied files that were changed or renamed since they were applied. */
  readonly mismatches: readonly MigrationMismatch[];
  /** Applied versions newer than the code knows (e.g. after a rolled-back deploy). */
  readonly unknownApplied: readonly number[];
  /** No pending version and no mismatch. */
  readonly upToDate: boolean;
}

/** What one `runMigrations` call did. */
export interface MigrationReport {
  /** Migrations this run applied, in order. */
  readonly applied: ReadonlyArray<{ readonly version: number; readonly name: string }>;
  /** How many of the code's migrations were already applied before this run. */
  readonly alreadyApplied: number;
  /** Applied versions newer than the code knows; logged as a warning and accepted. */
  readonly unknownApplied: readonly number[];
}

/** The little the migration runner needs from a logger (Powertools' Logger and `console` fit). */
export interface MigrationLogger {
  info(message: string, extra?: object): void;
  warn(message: string, extra?: object): void;
}
