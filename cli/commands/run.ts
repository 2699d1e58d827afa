import type { CliIo, Command } from '../command.js';
import { EXIT, parseCommandArgs } from '../command.js';

/** `run`: the host, through its own entry point (signals, exit code and all). */
export const run: Command = {
  name: 'run',
  summary: 'run the host: poll Kafka, invoke the handlers, commit offsets',
  help: `Usage: storage-consumer run

Runs the self-hosted event source mapping for the pipelines of STORAGE_PIPELINES (default: all of
them) until SIGTERM or SIGINT: the in-flight batches finish and commit, then it exits 0; it exits
1 when a pipeline failed, or at once naming every invalid setting. Configured by the environment
(KAFKA_BROKERS, DATABASE_URL, STORAGE_*: docs/settings.md; storage-consumer config checks them).
Same as npm run host.
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    if (!parseCommandArgs(run, args, io, {})) return EXIT.ok;
    // The host's entry point owns the process from here: it installs the signal and crash
    // handlers, and exits with the host's code.
    await import('../../host/main.js');
    return EXIT.ok;
  },
};
