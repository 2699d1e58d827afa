/**
 * What a failed fetch of `@platformatic/kafka` means for the consumer: a record batch it could
 * not decode (the same bytes fail the same way on every try: fatal, see kafka/port.ts
 * `UnreadableBatch`), a partition whose position lies outside its log, or anything else (the
 * network, a moved leader, a deleted topic: retried against fresh metadata).
 *
 * The client decodes a whole Fetch answer at once. A batch it cannot decompress or parse throws
 * from its decoder, and that error reaches the caller as it is, or among the errors of its own
 * retries (a `MultipleErrors`). Every error the client makes itself is a `GenericError` with a
 * `PLT_KFK_` code; what the decoder throws (zlib, the LZ4, Snappy and zstd decoders, a read past
 * the buffer) is not, except the two codes below.
 */
import { GenericError } from '@platformatic/kafka';
import { StorageConsumerError } from '../../shared/errors.js';

/** The member is no longer in the generation its batch was fetched in: it rebalances, left, or stops. */
export class GenerationEndedError extends StorageConsumerError {
  /** As kafkajs names the broker's error: host/membership.ts `revokeCauseOf` reads it. */
  readonly type = 'REBALANCE_IN_PROGRESS';
  constructor(what: string) {
    super(`${what}: this member's generation ended (the group rebalances, or the member left it)`);
    this.name = 'GenerationEndedError';
  }
}

/** Codes of the client's own errors that say the bytes could not be decoded. */
const DECODE_CODES: ReadonlySet<string> = new Set([
  'PLT_KFK_UNSUPPORTED_COMPRESSION',
  'PLT_KFK_OUT_OF_BOUNDS',
  'PLT_KFK_UNSUPPORTED_FORMAT',
]);

/** The error, the errors it aggregates and their causes, depth first (10 levels at most). */
function* errorsWithin(error: unknown, depth = 0): Generator<Error> {
  if (!(error instanceof Error) || depth > 10) return;
  yield error;
  if (error instanceof AggregateError) for (const inner of error.errors) yield* errorsWithin(inner, depth + 1);
  yield* errorsWithin(error.cause, depth + 1);
}

/** The decoder's own error in a failed fetch, if the fetch failed on bytes it could not decode. */
export function decodeFailureOf(error: unknown): Error | undefined {
  for (const inner of errorsWithin(error)) {
    if (GenericError.isGenericError(inner)) {
      if (DECODE_CODES.has(inner.code)) return inner;
      continue;
    }
    if (!(inner instanceof AggregateError)) return inner;
  }
  return undefined;
}

/** The codec a decode failure names, when it names one (zlib's errors are gzip's; the others say theirs). */
export function codecOf(failure: Error): string | undefined {
  const code = (failure as { code?: unknown }).code;
  if (typeof code === 'string' && code.startsWith('Z_')) return 'gzip';
  const named = /\b(gzip|snappy|lz4|zstd)\b/i.exec(`${failure.name} ${failure.message}`);
  return named ? (named[1] as string).toLowerCase() : undefined;
}

/** The Kafka error code a partition of a failed fetch answered with (Kafka's name, e.g. `OFFSET_OUT_OF_RANGE`). */
export function protocolErrorsOf(error: unknown): Set<string> {
  const ids = new Set<string>();
  for (const inner of errorsWithin(error)) {
    const apiId = (inner as { apiId?: unknown }).apiId;
    if (typeof apiId === 'string') ids.add(apiId);
  }
  return ids;
}
