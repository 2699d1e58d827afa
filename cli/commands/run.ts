/**
 * `storage-consumer run`: hands the process to the host's entry point (host/main.ts), as
 * `npm run host` does.
 */
import { defineCommand, EXIT } from '../command.js';

/** `run`: the host, through its own entry point (signals, exit code and all). */
export const run = defineCommand({
  name: 'run',
  summary: 'run the host: poll Kafka, invoke the handlers, commit offsets',
  description: `Runs the self-hosted event source mapping for the pipelines of STORAGE_PIPELINES (default: all of
them) until SIGTERM or SIGINT: the in-flight batches finish and commit, then it exits 0; it exits
1 when a pipeline failed, or at once naming every invalid setting. Configured by the environment
(KAFKA_BROKERS, DATABASE_URL, STORAGE_*: docs/settings.md; storage-consumer config checks them).
Same as npm run host. It takes no options: its output is the host's JSON log lines.`,
  options: {},
  async run() {
    // The host's entry point owns the process from here: it installs the signal and crash
    // handlers, and exits with the host's code.
    await import('../../host/main.js');
    return EXIT.ok;
  },
});
