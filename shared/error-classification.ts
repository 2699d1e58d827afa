/**
 * Error classification (docs/design.md section 4): predicates that say what a thrown error is
 * (transient, an authentication failure, data the database refused, a pooler's refusal, the
 * server's own answer), from the driver's SQLSTATEs, system codes and messages. The errors the
 * service raises itself are in errors.ts.
 */
import pg from 'pg';
import { AttemptDeadlineError } from './errors.js';

/**
 * SQLSTATEs that a retry on a fresh connection can cure (docs/design.md section 4): connection
 * exceptions (class 08), serialization failure, deadlock, too many connections, statement
 * timeout, admin/crash shutdown and cannot-connect-now, read-only after a failover.
 */
const TRANSIENT_SQLSTATES = new Set(['40001', '40P01', '53300', '57014', '57P01', '57P02', '57P03', '25006']);

/** Node/system error codes of a network that failed between us and PostgreSQL. */
const TRANSIENT_SYSTEM_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/**
 * node-postgres raises plain `Error`s (no code) when a connection dies or a pool checkout
 * times out; these are its messages.
 */
const TRANSIENT_DRIVER_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Connection terminated due to connection timeout',
  'Client was closed and is not queryable',
  // The client-side query timeout: the connection stopped answering (a hung network path).
  'Query read timeout',
];

function codeOf(error: unknown): string | undefined {
  if (error && typeof error === 'object' && 'code' in error && typeof error.code === 'string') return error.code;
  return undefined;
}

/** True for an error that a retry on a fresh connection can cure; such errors are never dead-lettered. */
export function isTransientError(error: unknown): boolean {
  if (error instanceof AttemptDeadlineError) return true;
  if (poolerRefusal(error) !== undefined) return false;
  const code = codeOf(error);
  if (error instanceof pg.DatabaseError && code) return code.startsWith('08') || TRANSIENT_SQLSTATES.has(code);
  if (code && TRANSIENT_SYSTEM_CODES.has(code)) return true;
  if (error instanceof AggregateError) return error.errors.some(isTransientError);
  if (error instanceof Error) {
    return TRANSIENT_DRIVER_MESSAGES.some((message) => error.message.includes(message));
  }
  return false;
}

/** Authentication failed (`28P01`): transient once, after the credentials were re-read. */
export function isAuthenticationFailure(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.code === '28P01';
}

/**
 * The database refused the data itself (class 22 data exception, class 23 integrity
 * violation): a permanent problem of one row, to be isolated and dead-lettered.
 */
export function isRefusedDataError(error: unknown): error is pg.DatabaseError {
  const code = codeOf(error);
  return error instanceof pg.DatabaseError && code !== undefined && (code.startsWith('22') || code.startsWith('23'));
}

/**
 * Why a connection pooler refused what this service sent, or `undefined` for any other error.
 * Such a refusal is a configuration problem no retry cures (docs/design.md section 10): PgBouncer answers
 * a startup parameter it does not know with 08P01 "unsupported startup parameter" (its other
 * 08P01 errors, e.g. "pgbouncer cannot connect to server", are transient); a named prepared
 * statement that did not survive transaction pooling fails with 26000 (does not exist on the
 * server connection this transaction got) or 42P05 (already exists on it).
 */
export function poolerRefusal(error: unknown): string | undefined {
  if (!(error instanceof pg.DatabaseError)) return undefined;
  if (error.code === '08P01' && error.message.includes('unsupported startup parameter')) {
    return (
      `the connection pooler refused a startup parameter (${error.message}): the service sends none of its own, ` +
      'so remove "options" (and any other libpq parameter) from DATABASE_URL / PGOPTIONS'
    );
  }
  if (error.code === '26000' || error.code === '42P05') {
    return (
      `named prepared statements do not survive this connection's pooler (${error.message}): ` +
      'set STORAGE_DB_PREPARED_STATEMENTS=false, or connect without a transaction-pooling pooler'
    );
  }
  return undefined;
}

/**
 * True when the error is the server's own answer (an ErrorResponse: a statement timeout, a
 * constraint): the connection still works and can take a ROLLBACK. A client-side query
 * timeout, a dropped connection or anything else is not: such a client is destroyed, never
 * kept waiting for one more query on a connection that stopped answering.
 */
export function isServerAnswer(error: unknown): boolean {
  return error instanceof pg.DatabaseError;
}
