import pg from 'pg';
import { MigrationError } from '../errors.js';
import { MIGRATION_LOCK_KEY } from './constants.js';
import type { MigrationLogger } from './types.js';

/**
 * SQLSTATEs of a lock wait cut short: `lock_timeout` (55P03), or a statement timeout no longer
 * than it (57014), as the custom resource sets them.
 */
const WAITED_TOO_LONG: ReadonlySet<string | undefined> = new Set(['55P03', '57014']);

/**
 * Runs `work` while holding the migration advisory lock on `client`.
 *
 * The lock is session-level on purpose: a transaction-scoped lock would be released when the
 * first migration commits. So `client` must be one dedicated connection that also runs `work`
 * (never a pool). The wait for another runner is bounded by the session's `lock_timeout`
 * (`lockTimeoutMs`, which the caller has set), not by a statement timeout.
 * @throws MigrationError when the lock cannot be taken; whatever `work` throws, unchanged.
 */
export async function withMigrationLock<T>(
  client: pg.ClientBase,
  { logger, lockTimeoutMs }: { readonly logger: MigrationLogger; readonly lockTimeoutMs: number },
  work: () => Promise<T>,
): Promise<T> {
  const key = MIGRATION_LOCK_KEY.toString();
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [key]);
  } catch (error) {
    const waitedTooLong = error instanceof pg.DatabaseError && WAITED_TOO_LONG.has(error.code);
    throw new MigrationError(
      waitedTooLong
        ? `the migration lock (advisory lock ${key}) was not free within ${lockTimeoutMs / 1000} s: another migration ` +
            'runner holds it (the wait is bounded by STORAGE_MIGRATION_LOCK_TIMEOUT_MS); nothing was applied'
        : `cannot take the migration lock (advisory lock ${key})`,
      { cause: error },
    );
  }
  try {
    return await work();
  } finally {
    try {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [key]);
    } catch (error) {
      // The session's end releases the lock anyway; the caller ends the connection next.
      logger.warn('could not release the migration lock; ending the connection releases it', {
        error: String(error),
      });
    }
  }
}
