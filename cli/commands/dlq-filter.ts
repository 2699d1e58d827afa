/**
 * The selection options of the dead-letter commands (`--pipeline`, `--reason`, `--since`), declared
 * once for `dlq list`, `dlq redrive` and `dlq purge`, and parsed into the filter of
 * cli/dead-letter-store.ts.
 */
import { REJECTION_REASONS } from '../../shared/records.js';
import type { RejectionReason } from '../../shared/records.js';
import { UsageError } from '../command.js';
import type { Options } from '../command.js';
import type { DeadLetterFilter } from '../dead-letter-store.js';
import { parseSince } from '../time.js';
import { parsePipeline, PIPELINE_OPTION } from './pipeline-option.js';

/** The selection options `dlq list`, `dlq redrive` and `dlq purge` share. */
export const FILTER_OPTIONS = {
  ...PIPELINE_OPTION,
  reason: { type: 'string', value: 'R', help: `only reason R (${REJECTION_REASONS.join(', ')})` },
  since: {
    type: 'string',
    value: 'T',
    help: 'only dead letters stored since T: an ISO timestamp (UTC unless it has an offset) or a duration ago such as 24h, 7d',
  },
} as const satisfies Options;

function isReason(value: string): value is RejectionReason {
  return (REJECTION_REASONS as readonly string[]).includes(value);
}

/** Checks the shared selection options; a bad value is a usage error naming the option. */
export function parseFilter(values: { pipeline?: string; reason?: string; since?: string }): DeadLetterFilter {
  const { pipeline, reason, since } = values;
  parsePipeline(pipeline);
  if (reason !== undefined && !isReason(reason)) {
    throw new UsageError(`--reason must be one of ${REJECTION_REASONS.join(', ')}, got ${JSON.stringify(reason)}`);
  }
  return {
    ...(pipeline === undefined ? {} : { pipeline }),
    ...(reason === undefined ? {} : { reason }),
    ...(since === undefined ? {} : { since: parseSince(since, '--since') }),
  };
}
