/**
 * The host process's last line of defence: what an uncaught exception, an unhandled rejection or
 * a process warning becomes (a JSON log line, and exit 1 for the first two).
 */
import type { CoreLogger } from '../shared/logger.js';
import { isHarmlessClientWarning } from '../kafka/clients.js';
import { loggedError } from '../shared/errors.js';

/**
 * Process-wide guards of a host process: an uncaught exception or unhandled rejection is
 * logged and exits 1 (a half-alive process counts as dead), and process warnings go to the
 * JSON log, except kafkajs' harmless `TimeoutNegativeWarning` (see ./kafkajs/warnings.ts).
 */
export function installProcessGuards(logger: CoreLogger): void {
  process.on('uncaughtException', (error) => {
    logger.error('uncaught exception; exiting', { ...loggedError(error) });
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error('unhandled promise rejection; exiting', { error: String(reason) });
    process.exit(1);
  });
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (isHarmlessClientWarning(warning)) return;
    logger.warn('process warning', { name: warning.name, warning: warning.message });
  });
}
