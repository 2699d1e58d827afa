/**
 * kafkajs' own log lines, routed into the host's JSON logger: the log level and `logCreator` the
 * host creates its Kafka client with (host/supervisor.ts). Only WARN and up pass; kafkajs' ERRORs
 * of the Connection namespace (every error response, retriable ones included) are logged as
 * warnings.
 */
import { logLevel } from 'kafkajs';
import type { LogEntry } from 'kafkajs';
import type { CoreLogger } from '../../shared/logger.js';
import type { KafkaClientOptions } from '../connection.js';

/** kafkajs' log lines through the host's JSON logger, from WARN up, as `kafkajs: <message>`. */
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
        (error ? logger.error : logger.warn).call(logger, `kafkajs: ${message}`, { namespace, ...extra });
      },
  };
}
