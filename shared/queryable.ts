import type { QueryResult, QueryResultRow } from 'pg';

/**
 * What repositories need of a connection: `query`. They never hold one; the caller passes the
 * transaction's client, which is what puts rows and dead letters in one transaction.
 */
export interface Queryable {
  query<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}
