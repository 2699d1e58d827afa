/**
 * Which kafkajs this folder was written against, and the error for a kafkajs it cannot work
 * with. The workarounds here reach into kafkajs' private modules (./index.ts lists them), so the
 * host does not start on a kafkajs other than the pinned one (see ./self-check.ts).
 */
import { createRequire } from 'node:module';
import { StorageConsumerError } from '../../shared/errors.js';

/** The kafkajs version package.json pins (`dependencies.kafkajs`); test/unit/kafka/kafkajs/index.test.ts holds the two equal. */
export const PINNED_KAFKAJS_VERSION = '2.2.4';

/** The installed kafkajs cannot be used as this project relies on it; the host does not start. */
export class KafkajsIncompatibleError extends StorageConsumerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KafkajsIncompatibleError';
  }
}

const require = createRequire(import.meta.url);

/** The version of the kafkajs Node resolves from here (its package.json), or `unknown`. */
export function installedKafkajsVersion(): string {
  try {
    const { version } = require('kafkajs/package.json') as { version?: unknown };
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Throws a {@link KafkajsIncompatibleError} naming both versions unless `installed` is the pinned one. */
export function checkKafkajsVersion(installed = installedKafkajsVersion(), pinned = PINNED_KAFKAJS_VERSION): void {
  if (installed === pinned) return;
  throw new KafkajsIncompatibleError(
    `kafkajs ${installed} is installed, but package.json pins kafkajs ${pinned}: storage-consumer relies on internals of kafkajs ` +
      `${pinned} (kafka/kafkajs/index.ts) and does not start on another version; install the pinned one (npm ci)`,
  );
}

/**
 * The error for a kafkajs that does not hand over a record's headers in wire order: without
 * them the host would store records without their headers, so it refuses instead.
 */
export function headersUnavailable(reason: string, options?: { cause?: unknown; version?: string }): KafkajsIncompatibleError {
  const version = options?.version ?? installedKafkajsVersion();
  return new KafkajsIncompatibleError(
    `kafkajs ${version} does not hand over record headers in wire order (${reason}); storage-consumer does not run on it rather than ` +
      `store records without their headers (kafka/kafkajs/index.ts lists the kafkajs internals it relies on)`,
    options?.cause === undefined ? undefined : { cause: options.cause },
  );
}
