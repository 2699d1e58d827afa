/**
 * kafkajs' own log lines, routed into the host's JSON logger: the log level and `logCreator` the
 * host creates its Kafka client with (host/supervisor.ts). Only WARN and up pass; kafkajs' ERRORs
 * of the Connection namespace (every error response, retriable ones included) are logged as
 * warnings. Every field of them, the message included, passes through the one redaction
 * (shared/redaction.ts): kafkajs names brokers in them (`broker`, an error's `host`, `stack`s).
 */
import { logLevel } from 'kafkajs';
import type { LogEntry } from 'kafkajs';
import type { CoreLogger } from '../../shared/logger.js';
import { redactAnswer, redactConnectionDetails } from '../../shared/redaction.js';
import type { KafkaClientOptions } from './connection.js';

/**
 * The value as the redaction reads it: an error becomes its name, message, stack, cause and own
 * fields (which JSON alone would drop, or keep without its message); an object met again inside
 * itself becomes `[circular]`.
 */
function plain(value: unknown, seen: Set<object> = new Set()): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return '[circular]';
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((entry) => plain(entry, seen));
    if (value instanceof Error) {
      const { name, message, stack, cause } = value;
      return plain({ ...value, name, message, stack, ...(cause === undefined ? {} : { cause }) }, seen);
    }
    if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return value;
    return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, plain(entry, seen)]));
  } finally {
    seen.delete(value);
  }
}

/** kafkajs' log lines through the host's JSON logger, from WARN up, as `kafkajs: <message>`, redacted. */
export function kafkaLogging(logger: CoreLogger): KafkaClientOptions {
  return {
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ namespace, level, log }: LogEntry) => {
        const { message, timestamp: _timestamp, logger: _logger, ...extra } = log;
        // kafkajs logs every error response of a connection as an ERROR, retriable ones
        // included (a coordinator still loading); the client retries them, so they warn.
        const error = level <= logLevel.ERROR && namespace !== 'Connection';
        (error ? logger.error : logger.warn).call(
          logger,
          `kafkajs: ${redactConnectionDetails(String(message))}`,
          redactAnswer(plain({ namespace, ...extra })) as Record<string, unknown>,
        );
      },
  };
}
