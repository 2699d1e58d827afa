/**
 * The advisory lock that serialises migration runners (docs/design.md section 7): session-level, on
 * the runner's one dedicated connection, held for the whole run and released in `finally`. A runner
 * that has to wait logs who holds it first.
 */
import pg from 'pg';
import { loggedError, MigrationError } from '../errors.js';
import { MIGRATION_LOCK_KEY } from './constants.js';
import type { MigrationLogger } from './model.js';

/**
 * SQLSTATEs of a lock wait cut short: `lock_timeout` (55P03), or a statement timeout no longer
 * than it (57014), as the custom resource sets them.
 */
const WAITED_TOO_LONG: ReadonlySet<string | undefined> = new Set(['55P03', '57014']);

/**
 * Who holds the migration lock: an advisory lock on a bigint key shows in pg_locks as classid
 * (high 32 bits) and objid (low 32 bits). Advisory locks are per database and pg_locks lists the
 * whole server's, so only this database's sessions count: a runner of another database holding
 * the same key is not in the way. docs/operations.md quotes this query.
 */
const HOLDER_QUERY =
  `SELECT a.pid, a.application_name, a.client_addr::text AS client_addr, a.state, a.query_start, left(a.query, 80) ` +
  `AS query
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint AND a.datname = current_database()`;

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
    const free = await client.query<{ taken: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS taken', [key]);
    if (free.rows[0]?.taken !== true) {
      // Say who holds it before a wait of up to STORAGE_MIGRATION_LOCK_TIMEOUT_MS.
      const holders = await client.query(HOLDER_QUERY, [key]);
      logger.info('waiting for the migration lock, held by another runner', {
        lock: key,
        waitMs: lockTimeoutMs,
        holders: holders.rows,
      });
      await client.query('SELECT pg_advisory_lock($1::bigint)', [key]);
    }
  } catch (error) {
    const waitedTooLong = error instanceof pg.DatabaseError && WAITED_TOO_LONG.has(error.code);
    throw new MigrationError(
      waitedTooLong
        ? `the migration lock (advisory lock ${key}) was not free within ${Math.round(lockTimeoutMs / 100) / 10} s: another migration ` +
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
        ...loggedError(error),
      });
    }
  }
}
