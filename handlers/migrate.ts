import { fileURLToPath } from 'node:url';
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import type { CustomResourceOutcome } from '../aws/custom-resource.js';
import { customResourceResponse, isCustomResourceEvent, sendCustomResourceResponse } from '../aws/custom-resource.js';
import { databaseSourceFromEnvironment } from '../aws/secret-database.js';
import { connectionConfig } from '../shared/db.js';
import { isAuthenticationFailure } from '../shared/error-classes.js';
import { migrationsHash } from '../shared/migrations/files.js';
import { runMigrations } from '../shared/migrations/run.js';
import type { MigrationReport } from '../shared/migrations/types.js';
import type { DatabaseSource } from '../shared/runtime.js';
import type { Settings } from '../shared/settings.js';
import { loadSettings } from '../shared/settings.js';

/**
 * `migrations/` next to `handlers/`: true in the repository and in the function's package, where
 * the SQL files are shipped beside the bundle (`package.patterns` in serverless.yml).
 */
const BUNDLED_MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));

/** Time kept back from the function's timeout to answer CloudFormation before Lambda kills us. */
const RESPONSE_RESERVE_MS = 15_000;

/** Options of `createMigrationHandler`; all optional (tests inject their own). */
export interface MigrationHandlerOptions {
  readonly settings?: Settings;
  readonly logger?: Logger;
  readonly database?: DatabaseSource;
  readonly directory?: string;
}

/**
 * The `migrate` function. Invoked by the deploy-time custom resource, it answers the
 * ResponseURL itself: Create/Update migrate and report SUCCESS, or FAILED with the error's
 * message (which rolls the deploy back before any consumer is touched); Delete is a no-op
 * SUCCESS (the schema outlives the stack). Invoked directly (`sls invoke -f migrate`), it
 * migrates and returns the report, or fails.
 */
export function createMigrationHandler(options: MigrationHandlerOptions = {}) {
  const settings = options.settings ?? loadSettings();
  const logger = options.logger ?? new Logger({ serviceName: 'storage-consumer', persistentKeys: { function: 'migrate' } });
  const directory = options.directory ?? (process.env.STORAGE_MIGRATIONS_DIR || BUNDLED_MIGRATIONS);
  const source: DatabaseSource = options.database ??
    databaseSourceFromEnvironment(settings.database) ?? { settings: async () => settings.database };

  const migrationLog = {
    info: (message: string, extra: object = {}) => logger.info(message, { ...extra }),
    warn: (message: string, extra: object = {}) => logger.warn(message, { ...extra }),
  };
  const migrateOnce = async (): Promise<MigrationReport> => {
    // The runner's own statement timeout (minutes, for DDL and lock waits), not the batches' one.
    const connection = connectionConfig(await source.settings(), { statement_timeout: undefined });
    return runMigrations({ connection, directory, logger: migrationLog });
  };
  const migrate = async (): Promise<MigrationReport> => {
    try {
      return await migrateOnce();
    } catch (error) {
      // 28P01: the secret was rotated under this container; read it again, once.
      if (!isAuthenticationFailure(error) || !source.refresh) throw error;
      logger.warn('database authentication failed; re-reading the secret once');
      await source.refresh();
      return migrateOnce();
    }
  };

  const answer = async (event: CloudFormationCustomResourceEvent, context: Context): Promise<CustomResourceOutcome> => {
    if (event.RequestType === 'Delete') {
      logger.info('custom resource deleted; the schema and its data are kept');
      return { status: 'SUCCESS', reason: 'schema kept' };
    }
    const bundledHash = await migrationsHash(directory);
    const requestedHash: unknown = event.ResourceProperties.MigrationsHash;
    if (event.RequestType === 'Update' && requestedHash !== bundledHash) {
      // A rollback: CloudFormation restores the old properties while this code may still be the
      // new one. Migrations only go forward, and the schema they left stays compatible.
      logger.warn('migrations hash differs from the bundled files (a rollback); leaving the schema as it is', {
        requestedHash,
        bundledHash,
      });
      return { status: 'SUCCESS', reason: 'rollback: schema left as it is', data: { MigrationsHash: bundledHash } };
    }
    const budgetMs = context.getRemainingTimeInMillis() - RESPONSE_RESERVE_MS;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`migrations did not finish within ${Math.round(budgetMs / 1000)} s (the function's timeout)`)),
        Math.max(budgetMs, 0),
      );
    });
    try {
      const report = await Promise.race([migrate(), deadline]);
      return {
        status: 'SUCCESS',
        reason: `applied ${report.applied.length}, already applied ${report.alreadyApplied}`,
        data: { MigrationsHash: bundledHash, Applied: report.applied.map((file) => file.version).join(',') },
      };
    } finally {
      clearTimeout(timer);
    }
  };

  return middy(async (event: unknown, context: Context): Promise<MigrationReport | undefined> => {
    if (!isCustomResourceEvent(event)) return migrate();
    logger.info('custom resource request', { requestType: event.RequestType, logicalResourceId: event.LogicalResourceId });
    let outcome: CustomResourceOutcome;
    try {
      outcome = await answer(event, context);
    } catch (error) {
      logger.error('migration failed', { error: error instanceof Error ? error : String(error) });
      outcome = { status: 'FAILED', reason: error instanceof Error ? error.message : String(error) };
    }
    await sendCustomResourceResponse(event.ResponseURL, customResourceResponse(event, outcome, context.logStreamName), {
      onRetry: (attempt, error) => logger.warn('ResponseURL not reached; retrying', { attempt, error: String(error) }),
    });
    logger.info('custom resource answered', { status: outcome.status });
    return undefined;
  }).use(injectLambdaContext(logger));
}

/** Lambda entry: the deploy-time migration custom resource, or a direct invoke. */
export const handler = createMigrationHandler();
