/**
 * How a migration runner connects (docs/design.md section 7): the batches' connection options
 * without their session bounds, and the runner's own lock wait and statement timeout. The Lambda
 * custom resource, `storage-consumer migrate`, `npm start` and the host's migrate-on-start all
 * connect through it.
 */
import type pg from 'pg';
import { connectionConfig } from '../db.js';
import type { DatabaseSettings } from '../settings.js';

/** How a migration runner connects and how long it may wait; see `migrationConnection`. */
export interface MigrationConnection {
  /** How to reach the database: host, credentials, TLS, connect timeout. No session timeouts. */
  readonly connection: pg.ClientConfig;
  /** Longest wait for a lock (the runners' advisory lock, a table lock of the DDL). */
  readonly lockTimeoutMs: number;
  /** Longest single statement; 0: none (a migration may rewrite a large table). */
  readonly statementTimeoutMs: number;
}

/** `application_name` of a migration session, so an operator can tell it in `pg_stat_activity`. */
const MIGRATION_APPLICATION_NAME = 'storage-consumer/migrate';

/**
 * The one migration connection every entry point uses (the Lambda custom resource,
 * `storage-consumer migrate` / `npm run migrate`, the host's migrate-on-start): the same host,
 * credentials, TLS and connect timeout as the batches, but none of the batches' session bounds.
 * A batch's 30 s statement timeout would fail a runner that waits for another one's lock;
 * instead the runner sets its own lock wait (`STORAGE_MIGRATION_LOCK_TIMEOUT_MS`) and no
 * statement timeout, with SET statements of its own once connected. A caller with a deadline
 * (the custom resource) passes tighter bounds.
 */
export function migrationConnection(
  settings: DatabaseSettings,
  bounds: Partial<Pick<MigrationConnection, 'lockTimeoutMs' | 'statementTimeoutMs'>> = {},
): MigrationConnection {
  const {
    statement_timeout: _statementTimeout,
    lock_timeout: _lockTimeout,
    query_timeout: _queryTimeout,
    idle_in_transaction_session_timeout: _idleTimeout,
    ...connection
  } = connectionConfig(settings);
  return {
    connection: { ...connection, application_name: MIGRATION_APPLICATION_NAME },
    lockTimeoutMs: bounds.lockTimeoutMs ?? settings.migrationLockTimeoutMs,
    statementTimeoutMs: bounds.statementTimeoutMs ?? 0,
  };
}
