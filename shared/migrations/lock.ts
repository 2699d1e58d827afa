import type pg from 'pg';
import { MigrationError } from '../errors.js';
import { MIGRATION_LOCK_KEY } from './constants.js';
import type { MigrationLogger } from './types.js';

/**
 * Runs `work` while holding the migration advisory lock on `client`.
 *
 * The lock is session-level on purpose: a transaction-scoped lock would be released when the
 * first migration commits. So `client` must be one dedicated connection that also runs `work`
 * (never a pool). Waiting for another runner counts against the statement timeout.
 * @throws MigrationError when the lock cannot be taken; whatever `work` throws, unchanged.
 */
export async function withMigrationLock<T>(
  client: pg.ClientBase,
  logger: MigrationLogger,
  work: () => Promise<T>,
): Promise<T> {
  const key = MIGRATION_LOCK_KEY.toString();
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [key]);
  } catch (error) {
    throw new MigrationError(`cannot take the migration lock (advisory lock ${key})`, { cause: error });
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
