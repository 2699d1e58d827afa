import { databaseSourceFromEnvironment } from '../aws/secret-database.js';
import { createPipelineHandler } from '../shared/lambda-handler.js';
import { createPipelineMetrics, recordBatchMetrics } from '../shared/metrics.js';
import { loadSettings } from '../shared/settings.js';

const settings = loadSettings();
const metrics = createPipelineMetrics('network-metrics');

/**
 * Lambda entry for the `network-metrics` topic (MSK or self-managed Kafka event source mapping).
 * Credentials come from Secrets Manager when `STORAGE_DB_SECRET_ID` is set, else from
 * `DATABASE_URL`; every batch emits its counters as CloudWatch metrics (EMF).
 */
export const handler = createPipelineHandler('network-metrics', {
  settings,
  database: databaseSourceFromEnvironment(settings.database),
  metrics,
  onBatch: (report) => recordBatchMetrics(metrics, report),
});
