import { describe, expect, it } from 'vitest';
import { withClient } from '../../../shared/connection.js';
import { AttemptDeadlineError } from '../../../shared/errors.js';
import type { FakeClient } from '../../helpers/fake-db.js';
import { FakePool, rejectionOf } from '../../helpers/fake-db.js';

/** A pool whose checkout takes `delayMs` and then hands out a FakeClient. */
class SlowPool extends FakePool {
  constructor(private readonly delayMs: number) {
    super();
  }

  override async connect(): Promise<FakeClient> {
    await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    return super.connect();
  }
}

describe('withClient', () => {
  it('returns the work’s result and gives the client back to the pool, without its error listener', async () => {
    // Prepare
    const pool = new FakePool();

    // Act
    const result = await withClient(pool.asPool(), 5_000, async (client) => (await client.query('SELECT 1')).command);

    // Assess
    expect(result).toBe('SELECT');
    expect(pool.clients[0]?.releasedWith).toBeNull();
    expect(pool.clients[0]?.listenerCount('error')).toBe(0);
  });

  it('destroys the client after any error of the work, and rethrows that error as it is', async () => {
    // Prepare
    const pool = new FakePool();
    const failure = new TypeError('unexpected');

    // Act
    const error = await rejectionOf(
      withClient(pool.asPool(), 5_000, async () => {
        throw failure;
      }),
    );

    // Assess
    expect(error).toBe(failure);
    expect(pool.clients[0]?.releasedWith).toBe(failure);
  });

  it('catches a connection error the client emits while checked out (unhandled, it would crash the process)', async () => {
    // Prepare
    const pool = new FakePool();
    const lost = new Error('Connection terminated unexpectedly');

    // Act
    const error = await rejectionOf(
      withClient(pool.asPool(), 5_000, async (client) => {
        (client as unknown as FakeClient).emitConnectionError(lost);
        throw lost;
      }),
    );

    // Assess
    expect(error).toBe(lost);
    expect(pool.clients[0]?.releasedWith).toBe(lost);
  });

  it('at the deadline abandons work that hangs, and destroys its client', async () => {
    // Prepare
    const pool = new FakePool();

    // Act
    const error = await rejectionOf(withClient(pool.asPool(), 50, () => new Promise<never>(() => undefined)));

    // Assess
    expect(error).toBeInstanceOf(AttemptDeadlineError);
    expect(pool.clients[0]?.releasedWith).toBe(error);
  });

  it('counts the checkout against the deadline, and destroys a client that arrives too late', async () => {
    // Prepare: the checkout takes 200 ms; the attempt may take 50 ms
    const pool = new SlowPool(200);
    let worked = false;

    // Act
    const error = await rejectionOf(
      withClient(pool.asPool(), 50, async () => {
        worked = true;
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 250));

    // Assess
    expect(error).toBeInstanceOf(AttemptDeadlineError);
    expect(worked).toBe(false);
    expect(pool.clients).toHaveLength(1);
    expect(pool.clients[0]?.releasedWith).toBeInstanceOf(AttemptDeadlineError);
  });
});
