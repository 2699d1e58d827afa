import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAuthenticationFailure, isRefusedDataError, isTransientError, poolerRefusal } from '../../../shared/error-classification.js';
import { AttemptDeadlineError } from '../../../shared/errors.js';
import { databaseError } from '../../helpers/fake-db.js';

/** A Node system error the way `net` raises it. */
function systemError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`connect ${code} 10.0.0.5:5432`), { code, errno: -1, syscall: 'connect' });
}

describe('isTransientError: SQLSTATEs', () => {
  it.each([
    ['08000', 'connection_exception'],
    ['08001', 'sqlclient_unable_to_establish_sqlconnection'],
    ['08003', 'connection_does_not_exist'],
    ['08006', 'connection_failure'],
    ['08P01', 'protocol_violation'],
    ['40001', 'serialization_failure'],
    ['40P01', 'deadlock_detected'],
    ['53300', 'too_many_connections'],
    ['57014', 'query_canceled (statement timeout)'],
    ['57P01', 'admin_shutdown'],
    ['57P02', 'crash_shutdown'],
    ['57P03', 'cannot_connect_now'],
    ['25006', 'read_only_sql_transaction (after a failover)'],
  ])('%s (%s) is transient', (code) => {
    // Prepare
    const error = databaseError(code);

    // Act
    const transient = isTransientError(error);

    // Assess
    expect(transient).toBe(true);
    expect(isRefusedDataError(error)).toBe(false);
  });

  it.each([
    ['22001', 'string_data_right_truncation'],
    ['22003', 'numeric_value_out_of_range'],
    ['22P02', 'invalid_text_representation'],
    ['22021', 'character_not_in_repertoire'],
    ['23502', 'not_null_violation'],
    ['23503', 'foreign_key_violation'],
    ['23505', 'unique_violation'],
    ['23514', 'check_violation'],
  ])('%s (%s) is data the database refused, not transient', (code) => {
    // Prepare
    const error = databaseError(code);

    // Act
    const refused = isRefusedDataError(error);

    // Assess
    expect(refused).toBe(true);
    expect(isTransientError(error)).toBe(false);
  });

  it.each([
    ['42P01', 'undefined_table'],
    ['42703', 'undefined_column'],
    ['42501', 'insufficient_privilege'],
    ['28P01', 'invalid_password'],
    ['28000', 'invalid_authorization_specification'],
    ['3D000', 'invalid_catalog_name'],
    ['25P02', 'in_failed_sql_transaction'],
    ['53100', 'disk_full'],
    ['XX000', 'internal_error'],
  ])('%s (%s) is neither transient nor refused data', (code) => {
    // Prepare
    const error = databaseError(code);

    // Act
    const transient = isTransientError(error);

    // Assess
    expect(transient).toBe(false);
    expect(isRefusedDataError(error)).toBe(false);
  });

  it('decides by the SQLSTATE, not by a driver-like message', () => {
    // Prepare
    const error = databaseError('42P01', 'Connection terminated while relation "reviews" does not exist');

    // Act
    const transient = isTransientError(error);

    // Assess
    expect(transient).toBe(false);
  });

  it('does not take a look-alike object with a SQLSTATE for a database refusal', () => {
    // Prepare
    const lookAlike = Object.assign(new Error('duplicate key'), { code: '23505' });

    // Act
    const refused = isRefusedDataError(lookAlike);

    // Assess
    expect(refused).toBe(false);
  });
});

describe('isTransientError: network and driver errors', () => {
  it.each([
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
  ])('system error %s is transient', (code) => {
    // Act
    const transient = isTransientError(systemError(code));

    // Assess
    expect(transient).toBe(true);
  });

  it.each(['ENOENT', 'EACCES', 'ERR_INVALID_ARG_TYPE'])('system error %s is not transient', (code) => {
    // Act
    const transient = isTransientError(systemError(code));

    // Assess
    expect(transient).toBe(false);
  });

  it.each([
    'Connection terminated unexpectedly',
    'Connection terminated',
    'timeout exceeded when trying to connect',
    'Connection terminated due to connection timeout',
    'Client has encountered a connection error and is not queryable',
    'Client was closed and is not queryable',
    'Query read timeout',
  ])('node-postgres %j (a plain Error without a code) is transient', (message) => {
    // Act
    const transient = isTransientError(new Error(message));

    // Assess
    expect(transient).toBe(true);
  });

  it('an AggregateError (several addresses tried) is transient when one of its errors is', () => {
    // Prepare
    const refused = new AggregateError([systemError('ECONNREFUSED'), systemError('EHOSTUNREACH')], 'connect failed');
    const unrelated = new AggregateError([new TypeError('x is not a function')], 'several failures');

    // Act
    const [refusedTransient, unrelatedTransient] = [isTransientError(refused), isTransientError(unrelated)];

    // Assess
    expect(refusedTransient).toBe(true);
    expect(unrelatedTransient).toBe(false);
  });

  it.each([
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'rows')")],
    ['an unrelated Error', new Error('something unexpected')],
    ['a string', 'Connection terminated'],
    ['undefined', undefined],
    ['null', null],
    ['an object with a transient-looking message', { message: 'Connection terminated' }],
  ])('%s is not transient', (_label, error) => {
    // Act
    const transient = isTransientError(error);

    // Assess
    expect(transient).toBe(false);
  });
});

describe('isTransientError on errors node-postgres really raises', () => {
  let silent: net.Server;
  let hangingUp: net.Server;
  const heldOpen = new Set<net.Socket>();
  const portOf = (server: net.Server) => (server.address() as net.AddressInfo).port;

  beforeAll(async () => {
    silent = net.createServer((socket) => heldOpen.add(socket));
    hangingUp = net.createServer((socket) => socket.destroy());
    await Promise.all([silent, hangingUp].map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))));
  });

  afterAll(async () => {
    for (const socket of heldOpen) socket.destroy();
    await Promise.all([silent, hangingUp].map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  });

  async function connectError(config: pg.PoolConfig): Promise<unknown> {
    const pool = new pg.Pool({ max: 1, ...config });
    try {
      const client = await pool.connect();
      client.release();
    } catch (error) {
      return error;
    } finally {
      await pool.end();
    }
    throw new Error('expected the connection to fail');
  }

  it('a refused connection', async () => {
    // Prepare: bind and close a port so nothing listens on it
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = portOf(closed);
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    // Act
    const error = await connectError({ host: '127.0.0.1', port });

    // Assess
    expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(isTransientError(error)).toBe(true);
  });

  it('a server that hangs up', async () => {
    // Act
    const error = await connectError({ host: '127.0.0.1', port: portOf(hangingUp) });

    // Assess
    expect(error).toMatchObject({ message: 'Connection terminated unexpectedly' });
    expect(isTransientError(error)).toBe(true);
  });

  it('a server that never answers, past the connect timeout', async () => {
    // Act
    const error = await connectError({ host: '127.0.0.1', port: portOf(silent), connectionTimeoutMillis: 50 });

    // Assess
    expect(error).toMatchObject({ message: 'Connection terminated due to connection timeout' });
    expect(isTransientError(error)).toBe(true);
  });

  it('a pool whose only connection is taken, past the connect timeout', async () => {
    // Prepare: a pool of one whose first checkout hangs on a silent server
    const pool = new pg.Pool({ host: '127.0.0.1', port: portOf(silent), max: 1, connectionTimeoutMillis: 200 });
    const first = pool.connect().catch((error: unknown) => error);

    // Act
    const second = await pool.connect().then(
      () => undefined,
      (error: unknown) => error,
    );
    await first;
    await pool.end();

    // Assess
    expect(second).toMatchObject({ message: 'timeout exceeded when trying to connect' });
    expect(isTransientError(second)).toBe(true);
  });
});

describe('isAuthenticationFailure', () => {
  it('is true only for a database 28P01', () => {
    // Prepare
    const candidates = [
      databaseError('28P01', 'password authentication failed for user "storage"'),
      databaseError('28000'),
      databaseError('42501'),
      Object.assign(new Error('password authentication failed'), { code: '28P01' }),
    ];

    // Act
    const verdicts = candidates.map(isAuthenticationFailure);

    // Assess
    expect(verdicts).toEqual([true, false, false, false]);
  });
});

describe('poolerRefusal', () => {
  it.each([
    ['08P01', 'unsupported startup parameter: statement_timeout', 'remove "options"'],
    ['08P01', 'unsupported startup parameter: options', 'remove "options"'],
    ['26000', 'prepared statement "upsert_0a1b" does not exist', 'STORAGE_DB_PREPARED_STATEMENTS=false'],
    ['42P05', 'prepared statement "upsert_0a1b" already exists', 'STORAGE_DB_PREPARED_STATEMENTS=false'],
  ])('%s %j is a configuration error, never transient', (code, message, advice) => {
    // Prepare
    const error = databaseError(code, message);

    // Act
    const refusal = poolerRefusal(error);

    // Assess
    expect(refusal).toContain(advice);
    expect(refusal).toContain(message);
    expect(isTransientError(error)).toBe(false);
  });

  it.each(['pgbouncer cannot connect to server', 'query_wait_timeout', 'server conn crashed?'])(
    'PgBouncer’s other 08P01 errors (%j) stay transient',
    (message) => {
      // Prepare
      const error = databaseError('08P01', message);

      // Act
      const refusal = poolerRefusal(error);

      // Assess
      expect(refusal).toBeUndefined();
      expect(isTransientError(error)).toBe(true);
    },
  );
});

describe('isTransientError: the invocation deadline', () => {
  it('an attempt cut at the deadline is transient (the batch is handed back, never dead-lettered)', () => {
    // Act
    const transient = isTransientError(new AttemptDeadlineError('the invocation’s time ran out'));

    // Assess
    expect(transient).toBe(true);
  });
});
