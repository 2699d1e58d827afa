/**
 * The service's own errors. Transient database errors are deliberately NOT wrapped: they keep
 * their driver types (`pg.DatabaseError`, Node's system errors) so "what is retryable" is
 * decided in one place, `shared/error-classification.ts`, from the driver's own codes.
 */

/** Base of every error this service raises itself. */
export class StorageConsumerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StorageConsumerError';
  }
}

/** A setting is missing or invalid; raised at start-up, naming the variable (every invalid one, in `problems`). */
export class ConfigurationError extends StorageConsumerError {
  /** One line per invalid setting or broken rule; the message alone when raised for one. */
  readonly problems: readonly string[];

  constructor(message: string, options?: { cause?: unknown; problems?: readonly string[] }) {
    super(message, options);
    this.name = 'ConfigurationError';
    this.problems = options?.problems ?? [message];
  }
}

/** The schema cannot be brought to the version the code needs. */
export class MigrationError extends StorageConsumerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/** The Lambda event itself is malformed (not one record: the whole event). Fatal. */
export class InvalidEventError extends StorageConsumerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InvalidEventError';
  }
}

/**
 * Transient failures outlasted the retry budget; the batch did not commit and must be
 * redelivered. `cause` is the last driver error, unwrapped.
 */
export class RetryBudgetExhaustedError extends StorageConsumerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RetryBudgetExhaustedError';
  }
}

/**
 * The invocation's time ran out while a database attempt was still running: the connection
 * was cut and the batch is handed back. Transient (a redelivery with time to spare cures it).
 */
export class AttemptDeadlineError extends StorageConsumerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AttemptDeadlineError';
  }
}

/** Causes followed at most: a cycle of causes (an error its own cause) must not loop. */
const MAX_CAUSE_DEPTH = 10;

/** An error and its causes (`error.cause`, and so on), outermost first; stops at the first non-Error or after 10. */
export function* causeChain(error: unknown): Generator<Error> {
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < MAX_CAUSE_DEPTH; cause = cause.cause, depth += 1)
    yield cause;
}

/** The fields a log line carries for an error: its text, its stack, and its causes. */
export interface LoggedError {
  /** `Name: message`, as `String(error)` gave it before: log queries and alerts on `error` still match. */
  readonly error: string;
  /** Where it was thrown (absent for a thrown non-Error). */
  readonly stack?: string;
  /** Its causes (`error.cause` and theirs), outermost first, each as `Name: message`; absent when it has none. */
  readonly causes?: readonly string[];
}

/**
 * An error as log line fields (docs/operations.md, "Log lines"): spread into a line's extra
 * (`logger.warn('...', { pipeline, ...loggedError(error) })`) instead of `error: String(error)`,
 * which lost the stack and the causes. The lines' replacer (shared/redaction.ts) redacts all three.
 */
export function loggedError(error: unknown): LoggedError {
  if (!(error instanceof Error)) return { error: String(error) };
  const causes = [...causeChain(error)].slice(1).map(String);
  return { error: String(error), ...(error.stack === undefined ? {} : { stack: error.stack }), ...(causes.length > 0 ? { causes } : {}) };
}
