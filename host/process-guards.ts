import type { CoreLogger } from '../shared/db.js';

/**
 * Process-wide guards of a host process: an uncaught exception or unhandled rejection is
 * logged and exits 1 (a half-alive process counts as dead), and process warnings go to the
 * JSON log. kafkajs 2.2.4 arms a timer with a negative delay
 * (requestQueue.scheduleCheckPendingRequests), which Node 24 reports on every response; the
 * timer still fires as intended, so that one warning is dropped.
 */
export function installProcessGuards(logger: CoreLogger): void {
  process.on('uncaughtException', (error) => {
    logger.error('uncaught exception; exiting', { error: String(error), stack: error.stack });
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error('unhandled promise rejection; exiting', { error: String(reason) });
    process.exit(1);
  });
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (warning.name === 'TimeoutNegativeWarning') return;
    logger.warn('process warning', { name: warning.name, warning: warning.message });
  });
}
