/**
 * The retry of a batch's database attempt: transient errors retried with exponential back-off
 * (jittered) within the invocation's remaining time, a rotated credential re-read once.
 */
import { setTimeout as defaultSleep } from 'node:timers/promises';
import { backoffDelayMs } from './backoff.js';
import type { Random } from './backoff.js';
import { isAuthenticationFailure, isTransientError, poolerRefusal } from './error-classification.js';
import { ConfigurationError, RetryBudgetExhaustedError } from './errors.js';
import type { RetrySettings } from './settings.js';

/** Options of one retried operation. */
export interface RetryOptions extends RetrySettings {
  /** Time left in the invocation (Lambda: `context.getRemainingTimeInMillis()`). */
  readonly remainingMs: () => number;
  /**
   * Time one attempt needs at least (its connect and statement timeouts): no attempt, the first
   * included, starts with less left, because the platform would kill it mid-way.
   */
  readonly attemptReserveMs: number;
  /** Re-reads rotated credentials; called at most once, on the first authentication failure. */
  readonly refreshCredentials?: () => Promise<void>;
  /** Told before each wait for a retry, e.g. to log it (the host's group heartbeat is a timer, not this). */
  readonly onWait?: (info: { attempt: number; delayMs: number; error: unknown }) => void;
  readonly sleep?: (ms: number) => Promise<void>;
  /** The back-off's jitter draw (shared/backoff.ts); `Math.random` unless a test fixes it. */
  readonly random?: Random;
}

/**
 * Runs `operation` (which must take a fresh connection each time) and retries transient
 * failures with exponential back-off: the first attempt plus up to `retries` more, waiting
 * base, 2*base, 4*base ... before them (each jittered down to as little as half), never past the invocation's remaining time.
 * Non-transient errors propagate at once, unwrapped, except a connection pooler's refusal,
 * which becomes a ConfigurationError saying what to change. When the budget is spent, or the
 * invocation has too little time left for an attempt, throws RetryBudgetExhaustedError with
 * the last driver error (if any) as `cause`.
 */
export async function withTransientRetry<T>(operation: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const sleep = options.sleep ?? defaultSleep;
  let credentialsRefreshed = false;
  const firstLeft = options.remainingMs();
  if (firstLeft < options.attemptReserveMs) {
    throw new RetryBudgetExhaustedError(
      `the invocation has ${Math.round(firstLeft)} ms left, less than the ${options.attemptReserveMs} ms one database attempt ` +
        'may need (connect and statement timeouts): handing the batch back without trying',
    );
  }
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await operation(attempt);
    } catch (error) {
      const refusal = poolerRefusal(error);
      if (refusal !== undefined) throw new ConfigurationError(refusal, { cause: error });
      const authentication = isAuthenticationFailure(error) && !credentialsRefreshed && options.refreshCredentials;
      if (!authentication && !isTransientError(error)) throw error;
      if (attempt > options.retries) {
        throw new RetryBudgetExhaustedError(`database still failing after ${attempt} attempts: ${String(error)}`, {
          cause: error,
        });
      }
      const delayMs = authentication ? 0 : backoffDelayMs(attempt, options.baseMs, undefined, options.random);
      if (options.remainingMs() < delayMs + options.attemptReserveMs) {
        throw new RetryBudgetExhaustedError(
          `database still failing after ${attempt} attempts and the invocation has too little time left: ${String(error)}`,
          { cause: error },
        );
      }
      options.onWait?.({ attempt, delayMs, error });
      if (authentication && options.refreshCredentials) {
        credentialsRefreshed = true;
        await options.refreshCredentials();
      }
      await sleep(delayMs);
    }
  }
}
