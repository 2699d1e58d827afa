import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { QueryResult, QueryResultRow } from 'pg';
import type { NamedStatement, Queryable } from '../../shared/queryable.js';

/**
 * One query a fake connection received, with the connection's number. `values` are the
 * parameters as PostgreSQL reads them: a parameter the text types as an array (`$3::text[]`)
 * that was sent as an array literal is recorded as its elements (text, or null for NULL).
 */
export interface RecordedQuery {
  readonly client: number;
  readonly text: string;
  readonly values: readonly unknown[] | undefined;
}

/** The elements of a one-dimensional PostgreSQL array literal (`{"a",NULL,"b\\"c"}`). */
function parseArrayLiteral(literal: string): Array<string | null> {
  const elements: Array<string | null> = [];
  let at = 1;
  while (at < literal.length - 1) {
    if (literal[at] === '"') {
      let element = '';
      for (at += 1; literal[at] !== '"'; at += 1) element += literal[at] === '\\' ? literal[++at] : literal[at];
      elements.push(element);
      at += 1;
    } else {
      const end = literal.indexOf(',', at) < 0 ? literal.length - 1 : literal.indexOf(',', at);
      const token = literal.slice(at, end);
      elements.push(token === 'NULL' ? null : token);
      at = end;
    }
    if (literal[at] === ',') at += 1;
  }
  return elements;
}

/** A parameter as node-postgres sends it: an object with `toPostgres` is sent as what that returns. */
function asSent(value: unknown): unknown {
  const hook = typeof value === 'object' && value !== null ? (value as { toPostgres?: unknown }).toPostgres : undefined;
  return typeof hook === 'function' ? (hook as () => unknown).call(value) : value;
}

function asServerReadsThem(text: string, values: readonly unknown[] | undefined): readonly unknown[] | undefined {
  if (values === undefined) return undefined;
  const arrayParameters = new Set([...text.matchAll(/\$(\d+)::[a-z ]+\[\]/g)].map((match) => Number(match[1]) - 1));
  return values.map((raw, index) => {
    const value = asSent(raw);
    return arrayParameters.has(index) && typeof value === 'string' && value.startsWith('{') ? parseArrayLiteral(value) : value;
  });
}

/**
 * Answers one query: rows to return, or throws to fail it. `undefined` means "no rows"
 * (what BEGIN, COMMIT and SAVEPOINT return).
 */
export type Responder = (query: RecordedQuery) => QueryResultRow[] | undefined | Promise<QueryResultRow[] | undefined>;

/** A `QueryResult` as node-postgres returns it, for `rows`. */
function queryResult<R extends QueryResultRow>(rows: R[], command = 'SELECT'): QueryResult<R> {
  return { command, rowCount: rows.length, oid: 0, fields: [], rows };
}

/** A real `pg.DatabaseError`, as node-postgres builds it from a server ErrorResponse. */
export function databaseError(code: string, message = `server refused with SQLSTATE ${code}`): pg.DatabaseError {
  const error = new pg.DatabaseError(message, message.length, 'error');
  error.code = code;
  error.severity = 'ERROR';
  return error;
}

/** A Node system error as `net` raises it when PostgreSQL cannot be reached. */
export function connectionRefused(): NodeJS.ErrnoException {
  return Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), {
    code: 'ECONNREFUSED',
    errno: -111,
    syscall: 'connect',
  });
}

/** The upsert of shared/upsert.ts: its INSERT's RETURNING rows are counted by an outer SELECT. */
const COUNTED_UPSERT = /^WITH written AS \(INSERT /;

/**
 * What PostgreSQL answers for the counted upsert, given the rows its INSERT returned (what a
 * responder gives for it, `{ inserted: boolean }` per written row): one row of counts.
 */
function countedUpsertAnswer(returned: readonly QueryResultRow[]): QueryResultRow {
  return { inserted: returned.filter((row) => row.inserted === true).length, written: returned.length };
}

/**
 * A `Queryable` that records every query and answers through `respond`. For the counted upsert,
 * `respond` gives the INSERT's RETURNING rows and the fake answers with their counts, as
 * PostgreSQL's outer SELECT would.
 */
export class FakeQueryable implements Queryable {
  readonly queries: RecordedQuery[] = [];

  constructor(
    private readonly respond: Responder = () => undefined,
    readonly id = 1,
    private readonly log: RecordedQuery[] = [],
  ) {}

  async query<R extends QueryResultRow = QueryResultRow>(
    textOrStatement: string | NamedStatement,
    maybeValues?: unknown[],
  ): Promise<QueryResult<R>> {
    const text = typeof textOrStatement === 'string' ? textOrStatement : textOrStatement.text;
    const values = typeof textOrStatement === 'string' ? maybeValues : textOrStatement.values;
    const recorded: RecordedQuery = { client: this.id, text, values: asServerReadsThem(text, values) };
    this.queries.push(recorded);
    this.log.push(recorded);
    const rows = (await this.respond(recorded)) ?? [];
    if (COUNTED_UPSERT.test(text)) return queryResult([countedUpsertAnswer(rows)] as unknown as R[]);
    return queryResult(rows as R[], text.split(/\s/, 1)[0]?.toUpperCase());
  }
}

/** A pool client that also records how it was released, and emits 'error' like pg's. */
export class FakeClient extends FakeQueryable {
  /** `undefined` until released; then the error it was released with, or `null` for none. */
  releasedWith: Error | null | undefined = undefined;
  private readonly events = new EventEmitter();

  on(event: 'error', listener: (error: Error) => void): this {
    this.events.on(event, listener);
    return this;
  }

  off(event: 'error', listener: (error: Error) => void): this {
    this.events.off(event, listener);
    return this;
  }

  /** Like a pg client whose connection died: with no listener, this throws (crashes the process). */
  emitConnectionError(error: Error): void {
    this.events.emit('error', error);
  }

  listenerCount(event: 'error'): number {
    return this.events.listenerCount(event);
  }

  release(error?: Error | boolean): void {
    if (this.releasedWith !== undefined) throw new Error(`client ${this.id} released twice`);
    this.releasedWith = error instanceof Error ? error : null;
  }
}

/**
 * A pool handing out a NEW `FakeClient` per `connect()`, numbered from 1; every query of every
 * client lands in one ordered `log`. `connectFailures` are thrown by the first checkouts, in turn.
 */
export class FakePool {
  readonly clients: FakeClient[] = [];
  readonly log: RecordedQuery[] = [];
  private readonly connectFailures: unknown[];

  constructor(
    private readonly respond: Responder = () => undefined,
    options: { connectFailures?: unknown[] } = {},
  ) {
    this.connectFailures = [...(options.connectFailures ?? [])];
  }

  /** Set by `end()`. */
  ended = false;

  async connect(): Promise<FakeClient> {
    // pg-pool's own message for a checkout from an ended pool.
    if (this.ended) throw new Error('Cannot use a pool after calling end on the pool');
    const failure = this.connectFailures.shift();
    if (failure !== undefined) throw failure;
    const client = new FakeClient(this.respond, this.clients.length + 1, this.log);
    this.clients.push(client);
    return client;
  }

  async end(): Promise<void> {
    this.ended = true;
  }

  /** The pool as the pipeline's type sees it. */
  asPool(): pg.Pool {
    return this as unknown as pg.Pool;
  }
}

/** The statement a recorded query is, for order assertions: `BEGIN`, `INSERT INTO reviews`, ... */
export function statementOf(query: Pick<RecordedQuery, 'text'>): string {
  const insert = /^(?:WITH written AS \()?INSERT INTO (\S+)/.exec(query.text);
  if (insert) return `INSERT INTO ${insert[1]}`;
  if (query.text.startsWith('SELECT') && query.text.includes('apps_registry_application')) return 'resolve';
  // The batch transaction opens with its settings in the same round trip.
  if (query.text.startsWith('BEGIN;')) return 'BEGIN';
  return query.text;
}

/** What `promise` rejects with; fails the test when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}
