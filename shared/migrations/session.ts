/**
 * How a migration run stopped by its deadline ends (run.ts): its client closed, its statement
 * cancelled (its backend terminated if that is not enough) from a second connection, and the end
 * confirmed, so that no COMMIT can follow and the lock is free.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/** How long `endSession` may take before it gives up confirming. */
const END_SESSION_TIMEOUT_MS = 10_000;
/** After a cancel, how long the session gets to roll back by itself before it is terminated. */
const CANCEL_GRACE_MS = 1_000;
const POLL_MS = 100;

/**
 * Ends a migration session for good and returns only once the server no longer lists it: its
 * client is closed first (nothing more, a COMMIT least of all, can be sent on it), then from a
 * second connection its running statement is cancelled (`pg_cancel_backend`) and, should the
 * session still be there a moment later, its backend terminated. A session the server no
 * longer lists has rolled its transaction back and released its advisory lock.
 * @throws when the end cannot be confirmed (e.g. the second connection fails); the caller says so.
 */
export async function endSession(connection: pg.ClientConfig, client: pg.Client, pid: number | undefined): Promise<void> {
  // The server reads the Terminate message only once the running statement is over.
  const closed = client.end().catch(() => undefined);
  // Not connected yet, or no statement run: there is nothing to roll back.
  if (pid === undefined) return closed;
  const started = Date.now();
  const watcher = new pg.Client({
    ...connection,
    connectionTimeoutMillis: Math.min(connection.connectionTimeoutMillis ?? END_SESSION_TIMEOUT_MS, END_SESSION_TIMEOUT_MS),
    // A database that stops answering mid-poll must not hold the answer to CloudFormation.
    query_timeout: END_SESSION_TIMEOUT_MS,
    application_name: `${connection.application_name ?? 'storage-consumer'} (deadline)`,
  });
  watcher.on('error', () => undefined);
  try {
    await watcher.connect();
    await watcher.query('SELECT pg_cancel_backend($1)', [pid]);
    let terminated = false;
    for (;;) {
      const { rows } = await watcher.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (rows.length === 0) return;
      const elapsed = Date.now() - started;
      if (elapsed > END_SESSION_TIMEOUT_MS) throw new Error(`session ${pid} is still listed after ${elapsed} ms`);
      if (!terminated && elapsed > CANCEL_GRACE_MS) {
        await watcher.query('SELECT pg_terminate_backend($1)', [pid]);
        terminated = true;
      }
      await sleep(POLL_MS);
    }
  } finally {
    await watcher.end().catch(() => undefined);
  }
}
