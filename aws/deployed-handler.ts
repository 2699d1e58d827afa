import { createPipelineHandler } from '../invoke/batch-handler.js';
import { createPipelineMetrics, recordBatchMetrics } from './metrics.js';
import type { PipelineName } from '../shared/pipelines.js';
import { loadSettings } from '../shared/settings.js';
import { databaseSourceFromEnvironment } from './secret-database.js';

/**
 * A consumer function's handler as deployed: the shared pipeline handler with database
 * credentials from Secrets Manager when `STORAGE_DB_SECRET_ID` is set (else `DATABASE_URL`)
 * and every batch's counters emitted as CloudWatch metrics (EMF).
 */
export function createLambdaPipelineHandler(pipeline: PipelineName, env: NodeJS.ProcessEnv = process.env) {
  const settings = loadSettings(env);
  const metrics = createPipelineMetrics(pipeline);
  const handler = createPipelineHandler(pipeline, {
    settings,
    database: databaseSourceFromEnvironment(settings.database, env),
    metrics,
    onBatch: (report) => recordBatchMetrics(metrics, report),
  });
  if (env.IS_LOCAL === 'true') {
    // `sls invoke local` runs one event per process, which would otherwise wait for the pool's
    // idle connections to time out before exiting. On Lambda the pool is kept between batches.
    const close = async () => handler.close();
    handler.use({ after: close, onError: close });
  }
  return handler;
}
