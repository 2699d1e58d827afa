/**
 * What a repository is handed instead of a connection: `query`, plain or as a named statement. The
 * caller passes a transaction's client (or, for a single statement, a pool), which is what puts a
 * batch's rows and dead letters, or a change and its audit entry, in one transaction. The migration
 * runner has its own (migrations/tracking.ts).
 */
import type { QueryResult, QueryResultRow } from 'pg';

/**
 * What repositories need of a connection: `query`. They never hold one; the caller passes the
 * transaction's client, which is what puts rows and dead letters in one transaction.
 */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
  /** A named statement: prepared once per connection, then only executed. */
  query<R extends QueryResultRow = QueryResultRow>(statement: NamedStatement): Promise<QueryResult<R>>;
}

/** A statement PostgreSQL parses and plans once per connection (node-postgres' named query). */
export interface NamedStatement {
  readonly name: string;
  readonly text: string;
  readonly values: unknown[];
}
