/**
 * A database attempt's connection: the time one attempt needs, the batch transaction's start, and
 * `withClient`, which owns a checked-out client's whole life under the invocation's deadline.
 */
import type pg from 'pg';
import { AttemptDeadlineError } from './errors.js';
import type { DatabaseSettings } from './settings.js';

/**
 * How far the client-side query timeout lies above the server's statement timeout: the server
 * cancels a slow statement first (a clean `57014`); the client gives up on a connection that
 * does not answer at all (a failover, a NAT that dropped the flow), where no cancel arrives.
 */
const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/**
 * Time kept back at the end of an invocation to hand the batch back (return the failure report
 * or throw) before the platform's own timeout kills the invocation.
 */
export const HAND_BACK_MARGIN_MS = 1_000;

/** The client-side query timeout: a little above the statement timeout. */
export function queryTimeoutMs(database: Pick<DatabaseSettings, 'statementTimeoutMs'>): number {
  return database.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS;
}

/**
 * The time one attempt may need at most before it either finishes or fails on its own
 * timeouts: the connect timeout plus one statement's client-side timeout, plus the time to hand
 * the batch back. No attempt starts with less left in the invocation.
 */
export function attemptTimeNeededMs(database: Pick<DatabaseSettings, 'connectTimeoutMs' | 'statementTimeoutMs'>): number {
  return database.connectTimeoutMs + queryTimeoutMs(database) + HAND_BACK_MARGIN_MS;
}

/**
 * Opens the batch's transaction with its session settings sent INSIDE it (one round trip):
 * the statement timeout, an idle-in-transaction timeout (a client that vanished mid-batch
 * releases its row locks) and time zone UTC. Transaction-scoped settings pass through every
 * pooler (PgBouncer in transaction mode, RDS Proxy without pinning), where startup parameters
 * are refused or pin the session.
 */
export async function beginBatchTransaction(client: pg.ClientBase, database: DatabaseSettings): Promise<void> {
  const timeout = Math.trunc(database.statementTimeoutMs);
  await client.query(
    `BEGIN; SET LOCAL statement_timeout = ${timeout}; ` +
      `SET LOCAL idle_in_transaction_session_timeout = ${timeout}; SET LOCAL TimeZone = 'UTC'`,
  );
}

interface SocketHolder {
  readonly connection?: { readonly stream?: { destroy(error?: Error): void } };
}

/**
 * Cuts the client's socket at once. node-postgres then fails the query in flight with
 * "Connection terminated unexpectedly"; `end()` would first try a polite goodbye on a
 * connection that may not answer.
 */
function destroySocket(client: pg.PoolClient): void {
  (client as unknown as SocketHolder).connection?.stream?.destroy();
}

/**
 * Runs `work` on a client checked out of `pool`, and owns the client's whole life:
 * * the checkout and the work together may take `timeLeftMs` at most (the connect timeout counts
 *   against the invocation's remaining time); at that deadline the connection is cut and the
 *   work fails with an AttemptDeadlineError (transient: the caller hands the batch back);
 * * while checked out, a connection error the client emits is caught (unhandled, it would crash
 *   the process); the failing query rejects as well, which is what the work acts on;
 * * afterwards the client goes back to the pool only when the work succeeded in time; after any
 *   error, or the deadline, it is destroyed (a client whose query timed out may still have that
 *   query running on its connection, and must never serve the next batch).
 */
export async function withClient<T>(pool: pg.Pool, timeLeftMs: number, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient | undefined;
  let expired: AttemptDeadlineError | undefined;
  let onExpiry: ((error: AttemptDeadlineError) => void) | undefined;
  const expiry = new Promise<never>((_, reject) => {
    onExpiry = reject;
  });
  expiry.catch(() => undefined);
  const timer = Number.isFinite(timeLeftMs)
    ? setTimeout(
        () => {
          expired = new AttemptDeadlineError(`the invocation's time ran out during a database attempt (${Math.round(timeLeftMs)} ms)`);
          if (client) destroySocket(client);
          onExpiry?.(expired);
        },
        Math.max(0, timeLeftMs),
      )
    : undefined;
  let broken: Error | undefined;
  const onConnectionError = (error: Error) => {
    broken ??= error;
  };
  try {
    const checkout = pool.connect();
    // A checkout that completes after the deadline hands its client straight back, destroyed.
    checkout.then(
      (late) => {
        if (expired && late !== client) late.release(expired);
      },
      () => undefined,
    );
    client = await Promise.race([checkout, expiry]);
    client.on('error', onConnectionError);
    const running = work(client);
    // After the deadline the work is abandoned; its late failure must not surface unhandled.
    running.catch(() => undefined);
    const result = await Promise.race([running, expiry]);
    if (expired) throw expired;
    return result;
  } catch (error) {
    broken ??= error instanceof Error ? error : new Error(String(error));
    // The deadline explains the failure better than the "Connection terminated" it caused.
    if (expired && error !== expired) throw new AttemptDeadlineError(expired.message, { cause: error });
    throw error;
  } finally {
    clearTimeout(timer);
    if (client) {
      client.off('error', onConnectionError);
      const failure = expired ?? broken;
      if (failure) destroySocket(client);
      client.release(failure);
    }
  }
}
