// The self-hosted event source mapping: `npm run host`. Exit 0 after a clean stop, 1 otherwise.
//
// A stop signal can arrive while the modules below are still loading (a container stopped
// right after it started, an orchestrator scaling down): nothing is in flight yet, so that is
// a clean stop. These first handlers stand in until `runHost` installs its own, in the same
// tick, so no signal falls between them.
let earlySignal: NodeJS.Signals | undefined;
const onEarlySignal = (signal: NodeJS.Signals) => {
  earlySignal ??= signal;
};
process.on('SIGTERM', onEarlySignal);
process.on('SIGINT', onEarlySignal);

const { ConfigurationError, loggedError } = await import('../shared/errors.js');
const { runHost } = await import('./run.js');
const { loadHostSettings } = await import('../config/host-settings.js');
const { installProcessGuards } = await import('./process-guards.js');
const { createHostLogger } = await import('./supervisor.js');

const logger = createHostLogger();
installProcessGuards(logger);

let code: number;
if (earlySignal !== undefined) {
  logger.info('stop signal received while starting; nothing was in flight', { signal: earlySignal });
  code = 0;
} else {
  try {
    process.off('SIGTERM', onEarlySignal);
    process.off('SIGINT', onEarlySignal);
    code = await runHost(loadHostSettings(), { logger });
  } catch (error) {
    if (error instanceof ConfigurationError) {
      // Every invalid setting at once, one per entry: fixing them one start at a time is slow.
      logger.error('invalid configuration', { ...loggedError(error), problems: error.problems });
    } else {
      logger.error('the host could not start', { ...loggedError(error) });
    }
    code = 1;
  }
}
process.exit(code);
