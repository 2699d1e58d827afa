/**
 * `storage-consumer dlq`: the command group of the dead-letter table; its subcommands are in
 * dlq-list.ts, dlq-show.ts, dlq-redrive.ts and dlq-purge.ts.
 */
import type { GroupCommand } from '../command.js';
import { dlqList } from './dlq-list.js';
import { dlqPurge } from './dlq-purge.js';
import { dlqRedrive } from './dlq-redrive.js';
import { dlqShow } from './dlq-show.js';

/** `dlq <list|show|redrive|purge>`: the dead-letter table. */
export const dlq: GroupCommand = {
  name: 'dlq',
  summary: 'dead letters: list, show, redrive, purge',
  subcommands: [dlqList, dlqShow, dlqRedrive, dlqPurge],
};
