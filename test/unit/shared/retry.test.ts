import { describe, expect, it } from 'vitest';
import { ConfigurationError, RetryBudgetExhaustedError } from '../../../shared/errors.js';
import type { RetryOptions } from '../../../shared/retry.js';
import { withTransientRetry } from '../../../shared/retry.js';
import { connectionRefused, databaseError, rejectionOf } from '../../helpers/fake-db.js';

/** A fake clock: sleeping spends the invocation's remaining time instead of waiting. */
function fakeInvocation(remainingAtStart = 15 * 60_000) {
  let remaining = remainingAtStart;
  const sleeps: number[] = [];
  const events: string[] = [];
  return {
    sleeps,
    events,
    options(overrides: Partial<RetryOptions> = {}): RetryOptions {
      return {
        retries: 5,
        baseMs: 1_000,
        attemptReserveMs: 0,
        // The jitter's draw that gives each wait its ceiling, so the schedule reads exactly.
        random: () => 0,
        remainingMs: () => remaining,
        sleep: async (ms) => {
          sleeps.push(ms);
          events.push(`sleep ${ms}`);
          remaining -= ms;
        },
        ...overrides,
      };
    },
  };
}

/** An operation that fails with the given errors in turn, then returns `result`. */
function failingWith<T>(errors: unknown[], result: T, events: string[] = []) {
  const attempts: number[] = [];
  const operation = async (attempt: number): Promise<T> => {
    attempts.push(attempt);
    events.push(`attempt ${attempt}`);
    const error = errors[attempts.length - 1];
    if (error !== undefined) throw error;
    return result;
  };
  return { operation, attempts };
}

describe('withTransientRetry', () => {
  it('returns the first attempt’s result without waiting', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([], 'stored');

    // Act
    const result = await withTransientRetry(operation, invocation.options());

    // Assess
    expect(result).toBe('stored');
    expect(attempts).toEqual([1]);
    expect(invocation.sleeps).toEqual([]);
  });

  it('backs off 1, 2, 4, 8, 16 × base and then gives up with the last driver error as cause', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const errors = Array.from({ length: 6 }, connectionRefused);
    const { operation, attempts } = failingWith(errors, 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options()));

    // Assess
    expect(attempts).toEqual([1, 2, 3, 4, 5, 6]);
    expect(invocation.sleeps).toEqual([1_000, 2_000, 4_000, 8_000, 16_000]);
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect((error as RetryBudgetExhaustedError).cause).toBe(errors[5]);
  });

  it('scales the back-off with the base and stops at the configured number of retries', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith(
      Array.from({ length: 10 }, () => databaseError('57P01')),
      'never',
    );

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options({ retries: 3, baseMs: 20 })));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(invocation.sleeps).toEqual([20, 40, 80]);
  });

  it('returns the result of the attempt that succeeds after transient failures', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([databaseError('40P01'), new Error('Connection terminated unexpectedly')], 42);

    // Act
    const result = await withTransientRetry(operation, invocation.options());

    // Assess
    expect(result).toBe(42);
    expect(attempts).toEqual([1, 2, 3]);
    expect(invocation.sleeps).toEqual([1_000, 2_000]);
  });

  it('with zero retries gives up after the first transient failure without waiting', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([connectionRefused()], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options({ retries: 0 })));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(attempts).toEqual([1]);
    expect(invocation.sleeps).toEqual([]);
  });

  it('never waits beyond the invocation’s remaining time', async () => {
    // Prepare: 10 s left, each attempt needs 1 s: waits 1, 2, 4 s fit, 8 s does not
    const invocation = fakeInvocation(10_000);
    const { operation, attempts } = failingWith(Array.from({ length: 6 }, connectionRefused), 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options({ attemptReserveMs: 1_000 })));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect((error as Error).message).toContain('too little time left');
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(invocation.sleeps).toEqual([1_000, 2_000, 4_000]);
  });

  it('does not retry at all when even the first wait does not fit', async () => {
    // Prepare
    const invocation = fakeInvocation(1_500);
    const { operation, attempts } = failingWith([connectionRefused()], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options({ attemptReserveMs: 1_000 })));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(attempts).toEqual([1]);
    expect(invocation.sleeps).toEqual([]);
  });

  it.each([
    ['a database refusal (23505)', databaseError('23505')],
    ['a missing table (42P01)', databaseError('42P01')],
    ['a programming error', new TypeError('rows is not iterable')],
  ])('propagates %s at once, unwrapped', async (_label, failure) => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([failure], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options()));

    // Assess
    expect(error).toBe(failure);
    expect(attempts).toEqual([1]);
    expect(invocation.sleeps).toEqual([]);
  });

  it('propagates a non-transient error that follows transient ones, unwrapped', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const fatal = databaseError('42703');
    const { operation, attempts } = failingWith([connectionRefused(), fatal], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options()));

    // Assess
    expect(error).toBe(fatal);
    expect(attempts).toEqual([1, 2]);
  });

  it('tells about every retry before waiting', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const first = databaseError('08006');
    const second = connectionRefused();
    const { operation } = failingWith([first, second], 'ok', invocation.events);
    const told: Array<{ attempt: number; delayMs: number; error: unknown }> = [];

    // Act
    await withTransientRetry(
      operation,
      invocation.options({
        onWait: (info) => {
          told.push(info);
          invocation.events.push(`retry ${info.attempt}`);
        },
      }),
    );

    // Assess
    expect(told).toEqual([
      { attempt: 1, delayMs: 1_000, error: first },
      { attempt: 2, delayMs: 2_000, error: second },
    ]);
    expect(invocation.events).toEqual(['attempt 1', 'retry 1', 'sleep 1000', 'attempt 2', 'retry 2', 'sleep 2000', 'attempt 3']);
  });
});

describe('withTransientRetry on an authentication failure (28P01)', () => {
  it('re-reads the credentials once and retries at once', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([databaseError('28P01')], 'stored', invocation.events);
    let refreshes = 0;
    const refreshCredentials = async () => {
      refreshes += 1;
      invocation.events.push('refresh');
    };

    // Act
    const result = await withTransientRetry(operation, invocation.options({ refreshCredentials }));

    // Assess
    expect(result).toBe('stored');
    expect(attempts).toEqual([1, 2]);
    expect(refreshes).toBe(1);
    expect(invocation.events.indexOf('refresh')).toBeLessThan(invocation.events.indexOf('attempt 2'));
    expect(invocation.sleeps.every((ms) => ms === 0)).toBe(true);
  });

  it('propagates a second 28P01 unwrapped, without refreshing again', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const second = databaseError('28P01');
    const { operation, attempts } = failingWith([databaseError('28P01'), second], 'never');
    let refreshes = 0;

    // Act
    const error = await rejectionOf(
      withTransientRetry(operation, invocation.options({ refreshCredentials: async () => void (refreshes += 1) })),
    );

    // Assess
    expect(error).toBe(second);
    expect(attempts).toEqual([1, 2]);
    expect(refreshes).toBe(1);
  });

  it('propagates a 28P01 that follows a transient failure and a refresh, still refreshing only once', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const last = databaseError('28P01');
    const { operation, attempts } = failingWith([databaseError('28P01'), connectionRefused(), last], 'never');
    let refreshes = 0;

    // Act
    const error = await rejectionOf(
      withTransientRetry(operation, invocation.options({ refreshCredentials: async () => void (refreshes += 1) })),
    );

    // Assess
    expect(error).toBe(last);
    expect(attempts).toEqual([1, 2, 3]);
    expect(refreshes).toBe(1);
  });

  it('propagates a 28P01 at once when there are no credentials to re-read', async () => {
    // Prepare
    const invocation = fakeInvocation();
    const failure = databaseError('28P01');
    const { operation, attempts } = failingWith([failure], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options()));

    // Assess
    expect(error).toBe(failure);
    expect(attempts).toEqual([1]);
  });

  it('starts no attempt, not even the first, when the time left cannot cover one', async () => {
    // Prepare: an attempt may need 6 s (connect and statement timeouts); 5 s are left
    const invocation = fakeInvocation(5_000);
    const { operation, attempts } = failingWith([], 'stored');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options({ attemptReserveMs: 6_000 })));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect((error as Error).message).toContain('handing the batch back without trying');
    expect((error as Error).cause).toBeUndefined();
    expect(attempts).toEqual([]);
    expect(invocation.sleeps).toEqual([]);
  });

  it.each([
    ['08P01 unsupported startup parameter', databaseError('08P01'), 'unsupported startup parameter: statement_timeout', 'DATABASE_URL'],
    [
      '26000 (prepared statement missing)',
      databaseError('26000'),
      'prepared statement "upsert_1" does not exist',
      'STORAGE_DB_PREPARED_STATEMENTS',
    ],
    [
      '42P05 (prepared statement exists)',
      databaseError('42P05'),
      'prepared statement "upsert_1" already exists',
      'STORAGE_DB_PREPARED_STATEMENTS',
    ],
  ])('turns a pooler’s refusal (%s) into a ConfigurationError at once, never a retry', async (_label, failure, message, names) => {
    // Prepare
    failure.message = message;
    const invocation = fakeInvocation();
    const { operation, attempts } = failingWith([failure], 'never');

    // Act
    const error = await rejectionOf(withTransientRetry(operation, invocation.options()));

    // Assess
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain(names);
    expect((error as Error).cause).toBe(failure);
    expect(attempts).toEqual([1]);
    expect(invocation.sleeps).toEqual([]);
  });
});
