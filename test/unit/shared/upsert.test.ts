import { describe, expect, it } from 'vitest';
import { PIPELINES } from '../../../shared/pipelines.js';
import type { Queryable } from '../../../shared/queryable.js';
import type { TableDescription } from '../../../shared/upsert.js';
import { PrecheckSwitch, upsertRows, upsertRowsIsolating, upsertStatement } from '../../../shared/upsert.js';
import type { RecordedQuery } from '../../helpers/fake-db.js';
import { databaseError, FakeQueryable, statementOf } from '../../helpers/fake-db.js';

interface Reading {
  readonly id: number;
  readonly sensor: string;
  readonly value: number | null;
  readonly takenAt: string;
}

const readingsAppendOnly: TableDescription<Reading> = {
  name: 'readings',
  columns: [
    { name: 'id', type: 'bigint', value: (row) => row.id },
    { name: 'sensor', type: 'text', value: (row) => row.sensor },
    { name: 'value', type: 'double precision', value: (row) => row.value },
    { name: 'taken_at', type: 'timestamptz', value: (row) => row.takenAt },
  ],
  conflictColumns: ['sensor', 'taken_at'],
};

const readingsLatestWins: TableDescription<Reading> = {
  name: 'latest_readings',
  columns: [
    { name: 'id', type: 'bigint', value: (row) => row.id },
    { name: 'sensor', type: 'text', value: (row) => row.sensor },
    { name: 'value', type: 'text', select: 'input.value::numeric', value: (row) => row.value },
    { name: 'taken_at', type: 'timestamptz', value: (row) => row.takenAt },
  ],
  conflictColumns: ['sensor'],
  update: { columns: ['value', 'taken_at'], where: 'EXCLUDED.taken_at > latest_readings.taken_at' },
};

const reading = (id: number): Reading => ({ id, sensor: `s${id}`, value: id / 10, takenAt: '2026-11-30T06:00:00.000000+00:00' });

describe('upsertStatement', () => {
  it('builds one unnest INSERT ... DO NOTHING whose RETURNING tells inserts apart, counted into one row', () => {
    // Act
    const sql = upsertStatement(readingsAppendOnly);

    // Assess
    expect(sql).toBe(
      'WITH written AS (INSERT INTO readings (id, sensor, value, taken_at) ' +
        'SELECT input.id, input.sensor, input.value, input.taken_at ' +
        'FROM unnest($1::bigint[], $2::text[], $3::double precision[], $4::timestamptz[]) AS input(id, sensor, value, taken_at) ' +
        'ON CONFLICT (sensor, taken_at) DO NOTHING RETURNING (xmax = 0) AS inserted) ' +
        'SELECT count(*) FILTER (WHERE inserted)::int AS inserted, count(*)::int AS written FROM written',
    );
  });

  it('builds a guarded DO UPDATE, with a column’s own select expression', () => {
    // Act
    const sql = upsertStatement(readingsLatestWins);

    // Assess
    expect(sql).toBe(
      'WITH written AS (INSERT INTO latest_readings (id, sensor, value, taken_at) ' +
        'SELECT input.id, input.sensor, input.value::numeric, input.taken_at ' +
        'FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) AS input(id, sensor, value, taken_at) ' +
        'ON CONFLICT (sensor) DO UPDATE SET value = EXCLUDED.value, taken_at = EXCLUDED.taken_at ' +
        'WHERE EXCLUDED.taken_at > latest_readings.taken_at RETURNING (xmax = 0) AS inserted) ' +
        'SELECT count(*) FILTER (WHERE inserted)::int AS inserted, count(*)::int AS written FROM written',
    );
  });

  it('filters the input with the update’s read-only pre-check before the insert', () => {
    // Prepare
    const table: TableDescription<Reading> = {
      ...readingsLatestWins,
      update: {
        ...readingsLatestWins.update!,
        keepWhere: 'input.taken_at > (SELECT stored.taken_at FROM latest_readings AS stored WHERE stored.sensor = input.sensor)',
      },
    };

    // Act
    const sql = upsertStatement(table);

    // Assess
    expect(sql).toContain(
      'AS input(id, sensor, value, taken_at) ' +
        'WHERE input.taken_at > (SELECT stored.taken_at FROM latest_readings AS stored WHERE stored.sensor = input.sensor) ' +
        'ON CONFLICT (sensor) DO UPDATE SET',
    );
  });

  it('gives the data tables the conflict clauses of the spec', () => {
    // Act
    const [appStats, reviews, networkMetrics] = [
      upsertStatement(PIPELINES['app-stats'].table),
      upsertStatement(PIPELINES.reviews.table),
      upsertStatement(PIPELINES['network-metrics'].table),
    ];

    // Assess
    expect(appStats).toMatch(/ON CONFLICT \(application_id, crawled_at\) DO NOTHING RETURNING \(xmax = 0\) AS inserted\) SELECT/);
    expect(networkMetrics).toMatch(/ON CONFLICT \(analysis_id\) DO NOTHING RETURNING \(xmax = 0\) AS inserted\) SELECT/);
    expect(reviews).toMatch(
      /ON CONFLICT \(review_id\) DO UPDATE SET .* WHERE EXCLUDED\.last_synced_at > reviews\.last_synced_at RETURNING/,
    );
    const updated = /DO UPDATE SET (.*) WHERE/
      .exec(reviews)?.[1]
      ?.split(', ')
      .map((set) => set.split(' = ')[0]);
    expect(updated).toEqual(expect.arrayContaining(['thumbs_up_count', 'content', 'last_synced_at', 'source_offset']));
    for (const untouched of ['review_id', 'application_id', 'first_seen_at', 'sentiment']) expect(updated).not.toContain(untouched);
  });
});

describe('upsertRows', () => {
  it('writes all rows with ONE statement, one array parameter per column in row order', async () => {
    // Prepare
    const database = new FakeQueryable(() => [{ inserted: true }, { inserted: true }]);
    const rows = [reading(1), { ...reading(2), value: null }];

    // Act
    await upsertRows(database, readingsAppendOnly, rows);

    // Assess
    expect(database.queries).toEqual([
      {
        client: 1,
        text: upsertStatement(readingsAppendOnly),
        // As PostgreSQL reads the array parameters: element text, NULL as null.
        values: [
          ['1', '2'],
          ['s1', 's2'],
          ['0.1', null],
          ['2026-11-30T06:00:00.000000+00:00', '2026-11-30T06:00:00.000000+00:00'],
        ],
      },
    ]);
  });

  it('sends an unnamed statement by default, a named one (stable name) only when asked', async () => {
    // Prepare: a connection that keeps what it was sent
    const sent: unknown[] = [];
    const database = {
      query: async (statement: unknown, values?: unknown[]) => {
        sent.push(typeof statement === 'string' ? { text: statement, values } : statement);
        return { command: 'SELECT', rowCount: 1, oid: 0, fields: [], rows: [{ inserted: 1, written: 1 }] };
      },
    } as Queryable;

    // Act
    await upsertRows(database, readingsAppendOnly, [reading(1)]);
    await upsertRows(database, readingsAppendOnly, [reading(2)], { prepared: true });
    await upsertRows(database, readingsAppendOnly, [reading(3)], { prepared: true });

    // Assess
    const [unnamed, named, again] = sent as Array<{ name?: string; text: string }>;
    expect(unnamed?.name).toBeUndefined();
    expect(named?.name).toMatch(/^upsert_[0-9a-f]{24}$/);
    expect(again?.name).toBe(named?.name);
    expect(named?.text).toBe(upsertStatement(readingsAppendOnly));
  });

  it('counts inserted, updated and skipped from RETURNING (xmax = 0)', async () => {
    // Prepare: 5 rows; the database inserted 2, updated 1 and declined 2
    const database = new FakeQueryable(() => [{ inserted: true }, { inserted: false }, { inserted: true }]);

    // Act
    const outcome = await upsertRows(database, readingsLatestWins, [1, 2, 3, 4, 5].map(reading));

    // Assess
    expect(outcome).toEqual({ inserted: 2, updated: 1, skipped: 2 });
  });

  it('refuses an answer that is not its one row of counts, rather than reporting made-up counts', async () => {
    // Prepare: an answer with a row per written row, as the statement before the counts had
    const database = {
      query: async () => ({ command: 'INSERT', rowCount: 2, oid: 0, fields: [], rows: [{ inserted: true }, { inserted: false }] }),
    } as unknown as Queryable;

    // Act
    const written = upsertRows(database, readingsAppendOnly, [reading(1), reading(2)]);

    // Assess
    await expect(written).rejects.toThrow('the upsert into readings answered 2 rows, not its one row of counts');
  });

  it('refuses one answer row whose counts are not integers (a bigint count without its ::int arrives as text)', async () => {
    // Prepare
    const database = {
      query: async () => ({ command: 'SELECT', rowCount: 1, oid: 0, fields: [], rows: [{ inserted: '1', written: '2' }] }),
    } as unknown as Queryable;

    // Act
    const written = upsertRows(database, readingsAppendOnly, [reading(1), reading(2)]);

    // Assess
    await expect(written).rejects.toThrow('the upsert into readings answered counts that are not integers: {"inserted":"1","written":"2"}');
  });

  it('sends nothing for no rows', async () => {
    // Prepare
    const database = new FakeQueryable();

    // Act
    const outcome = await upsertRows(database, readingsAppendOnly, []);

    // Assess
    expect(outcome).toEqual({ inserted: 0, updated: 0, skipped: 0 });
    expect(database.queries).toEqual([]);
  });

  it('propagates the database’s error as it is', async () => {
    // Prepare
    const refusal = databaseError('23514');
    const database = new FakeQueryable(() => {
      throw refusal;
    });

    // Act
    const written = upsertRows(database, readingsAppendOnly, [reading(1)]);

    // Assess
    await expect(written).rejects.toBe(refusal);
  });
});

/**
 * A transaction as PostgreSQL runs it, for one table: an INSERT holding a refused id fails with
 * `code`, after which everything but ROLLBACK [TO SAVEPOINT] fails with 25P02 until rolled back.
 * `transcript` reads like the session: `SAVEPOINT`, `INSERT 1,2 ok`, `INSERT 3 refused`, ...
 */
function transaction(
  refusedIds: ReadonlySet<number>,
  options: { code?: string; skipIds?: ReadonlySet<number>; failOn?: (query: RecordedQuery) => Error | undefined } = {},
) {
  const transcript: string[] = [];
  let aborted = false;
  const database = new FakeQueryable((query) => {
    const injected = options.failOn?.(query);
    if (injected) {
      transcript.push(`${statementOf(query)} failed`);
      aborted = true;
      throw injected;
    }
    if (statementOf(query).startsWith('INSERT')) {
      const ids = ((query.values?.[0] ?? []) as string[]).map(Number);
      if (aborted) throw databaseError('25P02', 'current transaction is aborted');
      if (ids.some((id) => refusedIds.has(id))) {
        transcript.push(`INSERT ${ids.join(',')} refused`);
        aborted = true;
        throw databaseError(options.code ?? '23514', 'new row for relation "readings" violates check constraint');
      }
      transcript.push(`INSERT ${ids.join(',')} ok`);
      return ids.filter((id) => !options.skipIds?.has(id)).map(() => ({ inserted: true }));
    }
    if (query.text.startsWith('ROLLBACK')) aborted = false;
    else if (aborted) throw databaseError('25P02', 'current transaction is aborted');
    transcript.push(query.text.replace(' isolate_refused_rows', ''));
    return undefined;
  });
  return { database, transcript };
}

describe('upsertRowsIsolating', () => {
  it('bisects until exactly the refused rows stand alone, writing all the others', async () => {
    // Prepare
    const { database, transcript } = transaction(new Set([3, 6]));
    const rows = [1, 2, 3, 4, 5, 6, 7, 8].map(reading);

    // Act
    const { outcome, refused } = await upsertRowsIsolating(database, readingsAppendOnly, rows);

    // Assess
    expect(refused.map(({ row }) => row.id)).toEqual([3, 6]);
    expect(refused.map(({ error }) => error.code)).toEqual(['23514', '23514']);
    expect(outcome).toEqual({ inserted: 6, updated: 0, skipped: 0 });
    const attempt = (ids: string, ok: boolean) =>
      ok
        ? ['SAVEPOINT', `INSERT ${ids} ok`, 'RELEASE SAVEPOINT']
        : ['SAVEPOINT', `INSERT ${ids} refused`, 'ROLLBACK TO SAVEPOINT', 'RELEASE SAVEPOINT'];
    expect(transcript).toEqual([
      ...attempt('1,2,3,4,5,6,7,8', false),
      ...attempt('1,2,3,4', false),
      ...attempt('1,2', true),
      ...attempt('3,4', false),
      ...attempt('3', false),
      ...attempt('4', true),
      ...attempt('5,6,7,8', false),
      ...attempt('5,6', false),
      ...attempt('5', true),
      ...attempt('6', false),
      ...attempt('7,8', true),
    ]);
  });

  it('writes everything under one savepoint when nothing is refused', async () => {
    // Prepare
    const { database, transcript } = transaction(new Set());

    // Act
    const { outcome, refused } = await upsertRowsIsolating(database, readingsAppendOnly, [1, 2, 3].map(reading));

    // Assess
    expect(refused).toEqual([]);
    expect(outcome).toEqual({ inserted: 3, updated: 0, skipped: 0 });
    expect(transcript).toEqual(['SAVEPOINT', 'INSERT 1,2,3 ok', 'RELEASE SAVEPOINT']);
  });

  it('refuses every row when each one is refused, and sums the parts’ outcomes otherwise', async () => {
    // Prepare
    const all = transaction(new Set([1, 2, 3]));
    const some = transaction(new Set([1]), { code: '22003', skipIds: new Set([3]) });

    // Act
    const allRefused = await upsertRowsIsolating(all.database, readingsAppendOnly, [1, 2, 3].map(reading));
    const someRefused = await upsertRowsIsolating(some.database, readingsAppendOnly, [1, 2, 3, 4].map(reading));

    // Assess
    expect(allRefused.refused.map(({ row }) => row.id)).toEqual([1, 2, 3]);
    expect(allRefused.outcome).toEqual({ inserted: 0, updated: 0, skipped: 0 });
    expect(someRefused.refused.map(({ row, error }) => [row.id, error.code])).toEqual([[1, '22003']]);
    expect(someRefused.outcome).toEqual({ inserted: 2, updated: 0, skipped: 1 });
  });

  it('sends nothing for no rows', async () => {
    // Prepare
    const { database } = transaction(new Set());

    // Act
    const result = await upsertRowsIsolating(database, readingsAppendOnly, []);

    // Assess
    expect(result).toEqual({ outcome: { inserted: 0, updated: 0, skipped: 0 }, refused: [] });
    expect(database.queries).toEqual([]);
  });

  it('propagates an error that is not a refusal at once, unwrapped, without bisecting', async () => {
    // Prepare: the second part's INSERT hits a deadlock
    const deadlock = databaseError('40P01');
    let inserts = 0;
    const { database, transcript } = transaction(new Set([1]), {
      failOn: (query) => (statementOf(query).startsWith('INSERT') && ++inserts === 2 ? deadlock : undefined),
    });

    // Act
    const isolated = upsertRowsIsolating(database, readingsAppendOnly, [1, 2, 3, 4].map(reading));

    // Assess
    await expect(isolated).rejects.toBe(deadlock);
    expect(transcript).toEqual([
      'SAVEPOINT',
      'INSERT 1,2,3,4 refused',
      'ROLLBACK TO SAVEPOINT',
      'RELEASE SAVEPOINT',
      'SAVEPOINT',
      'INSERT INTO readings failed',
    ]);
  });
});

describe('PrecheckSwitch', () => {
  it('is off until a batch had skipped rows, and off again after a batch without', () => {
    // Prepare
    const precheck = new PrecheckSwitch();
    const states = [precheck.enabled];

    // Act
    for (const skipped of [3, 1, 0, 0, 5]) {
      precheck.observe({ inserted: 0, updated: 0, skipped });
      states.push(precheck.enabled);
    }

    // Assess
    expect(states).toEqual([false, true, true, false, false, true]);
  });

  it('leaves the pre-check out of the statement when asked, and keeps the guard', () => {
    const table = PIPELINES.reviews.table;
    const without = upsertStatement(table, false);
    expect(upsertStatement(table)).toContain('WHERE input.last_synced_at > COALESCE(');
    expect(without).not.toContain('WHERE input.last_synced_at');
    expect(without).toContain('WHERE EXCLUDED.last_synced_at > reviews.last_synced_at RETURNING');
  });
});
