import { ConfigurationError } from '../shared/errors.js';
import { runHost } from './run.js';
import { loadHostSettings } from './settings.js';
import { installProcessGuards } from './process-guards.js';
import { createHostLogger } from './supervisor.js';

// The self-hosted event source mapping: `npm run host`. Exit 0 after a clean stop, 1 otherwise.
const logger = createHostLogger();
installProcessGuards(logger);

let code: number;
try {
  code = await runHost(loadHostSettings(), { logger });
} catch (error) {
  logger.error(error instanceof ConfigurationError ? 'invalid configuration' : 'the host could not start', { error: String(error) });
  code = 1;
}
process.exit(code);
