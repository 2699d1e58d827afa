import { ConfigurationError } from '../shared/errors.js';
import { runHost } from './run.js';
import { loadHostSettings } from './settings.js';
import { createHostLogger } from './supervisor.js';

// The self-hosted event source mapping: `npm run host`. Exit 0 after a clean stop, 1 otherwise.
const logger = createHostLogger();
process.on('uncaughtException', (error) => {
  logger.error('uncaught exception; exiting', { error: String(error), stack: error.stack });
  process.exit(1);
});
process.on('unhandledRejection', (reason) => {
  logger.error('unhandled promise rejection; exiting', { error: String(reason) });
  process.exit(1);
});
// Process warnings go to the JSON log. kafkajs 2.2.4 arms a timer with a negative delay
// (requestQueue.scheduleCheckPendingRequests) which Node 24 reports on every response; the
// timer still fires as intended, so that one warning is dropped.
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (warning.name === 'TimeoutNegativeWarning') return;
  logger.warn('process warning', { name: warning.name, warning: warning.message });
});

let code: number;
try {
  code = await runHost(loadHostSettings(), { logger });
} catch (error) {
  logger.error(error instanceof ConfigurationError ? 'invalid configuration' : 'the host could not start', { error: String(error) });
  code = 1;
}
process.exit(code);
