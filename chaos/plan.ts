/**
 * What the chaos workload is made of: planned messages, each with the outcome it must have, and
 * how the checker names a stored row's natural key.
 */
import type { PipelineName } from '../shared/pipelines.js';
import { PIPELINE_NAMES, PIPELINES } from '../shared/pipelines.js';
import type { RejectionReason } from '../shared/records.js';
import type { RowText } from '../fixtures/row-text.js';
import type { DataTable } from './stored-rows.js';
import { isDataTable } from './stored-rows.js';

/** What one produced message must become. */
export type PlannedOutcome =
  | {
      readonly kind: 'row';
      readonly table: DataTable;
      /** The natural key as the checker builds it from a stored row (see `naturalKeyOf`). */
      readonly key: string;
      readonly text: RowText;
      /** Reviews only: `last_synced_at` as UTC microsecond text (orders the versions). */
      readonly syncedAt?: string;
    }
  | { readonly kind: 'dead_letter'; readonly reason: RejectionReason; readonly detailIncludes?: string };

/** One message to produce. Its id travels in the `chaos-id` header. */
export interface PlannedMessage {
  readonly id: number;
  readonly topic: PipelineName;
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly expect: PlannedOutcome;
  /** For the report: `review`, `review (older version late)`, `poison: invalid_json` ... */
  readonly label: string;
}

/** An application of the App API stand-in. */
export interface ChaosApp {
  readonly id: string;
  readonly packageName: string;
  readonly active: boolean;
}

/** The whole workload, in production order. */
export interface Workload {
  readonly seed: number;
  readonly apps: readonly ChaosApp[];
  readonly messages: readonly PlannedMessage[];
}

/** Header carrying a message's plan id, so the checker can map log records back to the plan. */
export const PLAN_HEADER = 'chaos-id';

/**
 * Values no decoder rule forbids but a CHECK constraint of the chaos database does (the harness
 * adds it): messages carrying them must be dead-lettered `rejected_by_database`.
 */
export const REFUSED_MARKERS = {
  reviews: { column: 'user_name', value: 'chaos:refused-by-database' },
  app_stats: { column: 'app_version', value: 'chaos:refused' },
  network_metrics: { column: 'analyzer_version', value: 'chaos:refused' },
} as const satisfies Record<DataTable, { column: string; value: string }>;

/** The natural key of a stored row, as `PlannedOutcome.key` has it. */
export function naturalKeyOf(table: DataTable, text: RowText): string {
  if (table === 'app_stats') return `${text.application_id}|${text.crawled_at}`;
  if (table === 'reviews') return String(text.review_id);
  return String(text.analysis_id);
}

/** The table each pipeline writes. */
const TABLE_OF: { readonly [N in PipelineName]?: DataTable } = Object.fromEntries(
  PIPELINE_NAMES.flatMap((name) => {
    const table = PIPELINES[name].table.name;
    return isDataTable(table) ? [[name, table]] : [];
  }),
);

/**
 * The pipelines the workload covers: those whose table the checker reads as exact text
 * (chaos/stored-rows.ts). The harness names the others at its start; they still run, unexercised.
 */
export const CHAOS_PIPELINES: readonly PipelineName[] = PIPELINE_NAMES.filter((name) => TABLE_OF[name] !== undefined);

/** The table a covered pipeline writes. */
export function tableOf(pipeline: PipelineName): DataTable {
  const table = TABLE_OF[pipeline];
  if (table === undefined) throw new Error(`chaos has no model of pipeline ${pipeline}'s table (chaos/stored-rows.ts)`);
  return table;
}
