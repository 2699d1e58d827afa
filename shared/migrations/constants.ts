/**
 * The migration runner's fixed values: the advisory lock's key, the names of the tracking table and
 * of the App API's table, the repository's migrations folder, and the default connect and lock
 * timeouts.
 */
import { fileURLToPath } from 'node:url';

/**
 * Key of the session-level advisory lock that serializes migration runners. Fixed forever: a
 * runner of an older or newer release must contend for the same lock. Advisory locks are
 * database-wide, so this also serializes runners working on different schemas of one database.
 */
export const MIGRATION_LOCK_KEY = 5_717_042_601_998_273_319n;

/** The table that records applied migrations. */
export const TRACKING_TABLE = 'storage_consumer_migrations';

/** The App API's table the migrations reference; it must exist before they run. */
export const APPLICATIONS_TABLE = 'apps_registry_application';

/**
 * The repository's `migrations/` directory, resolved from this module. Bundled code (Lambda)
 * does not keep this layout and passes its own directory.
 */
export const DEFAULT_MIGRATIONS_DIRECTORY = fileURLToPath(new URL('../../migrations/', import.meta.url));

/** Connect timeout when the caller's connection config sets none. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Lock wait when the caller sets none: how long a runner waits for another runner's advisory
 * lock (or a table lock its DDL needs) before it gives up (`STORAGE_MIGRATION_LOCK_TIMEOUT_MS`).
 */
export const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60_000;
