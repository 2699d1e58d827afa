import { fileURLToPath } from 'node:url';
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import { isAuthenticationFailure } from '../shared/error-classification.js';
import { migrationsHash } from '../shared/migrations/files.js';
import { migrationConnection, runMigrations } from '../shared/migrations/index.js';
import type { MigrationReport } from '../shared/migrations/model.js';
import type { DatabaseSource } from '../shared/runtime.js';
import type { Settings } from '../shared/settings.js';
import { loadSettings } from '../shared/settings.js';
import { loadSetting } from '../shared/setting.js';
import { STORAGE_MIGRATIONS_DIR } from '../shared/setting-declarations.js';
import type { CustomResourceOutcome } from './custom-resource.js';
import { customResourceResponse, isCustomResourceEvent, sendCustomResourceResponse } from './custom-resource.js';
import { databaseSourceFromEnvironment } from './secret-database.js';

/**
 * `migrations/` next to `handlers/`: true in the repository and in the function's package, where
 * the SQL files are shipped beside the bundle (`package.patterns` in serverless.yml).
 */
const BUNDLED_MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));

/**
 * Time kept back from the function's timeout once the deadline strikes: to end the migration
 * session (up to 10 s, see `endSession`) and to answer CloudFormation before Lambda kills us.
 */
const RESPONSE_RESERVE_MS = 15_000;

/**
 * The server's own statement and lock timeouts stay this far below the budget; also the least
 * budget worth starting with.
 */
const SERVER_TIMEOUT_MARGIN_MS = 1_000;

/** Options of `createMigrationHandler`; all optional (tests inject their own). */
export interface MigrationHandlerOptions {
  readonly settings?: Settings;
  readonly logger?: Logger;
  readonly database?: DatabaseSource;
  readonly directory?: string;
}

/** What the handler needs from the environment, or why it could not be read. */
type Setup =
  | { readonly ok: true; readonly settings: Settings; readonly source: DatabaseSource; readonly directory: string }
  | { readonly ok: false; readonly error: unknown };

function readSetup(options: MigrationHandlerOptions): Setup {
  try {
    const settings = options.settings ?? loadSettings();
    const source = options.database ?? databaseSourceFromEnvironment(settings.database) ?? { settings: async () => settings.database };
    const directory = options.directory ?? loadSetting(process.env, STORAGE_MIGRATIONS_DIR) ?? BUNDLED_MIGRATIONS;
    return { ok: true, settings, source, directory };
  } catch (error) {
    return { ok: false, error };
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The `migrate` function. Invoked by the deploy-time custom resource, it answers the
 * ResponseURL itself: Create/Update migrate and report SUCCESS, or FAILED with the error's
 * message (which rolls the deploy back before any consumer is touched); Delete is a no-op
 * SUCCESS (the schema outlives the stack). Invoked directly (`sls invoke -f migrate`), it
 * migrates and returns the report, or fails.
 *
 * CloudFormation is never left waiting: a bad setting does not stop the module from loading,
 * it is answered as FAILED naming the variable; and at its deadline a migration is stopped
 * for good (statement cancelled, transaction rolled back, lock released) before FAILED is
 * answered, so a migration that answered FAILED never commits afterwards.
 */
export function createMigrationHandler(options: MigrationHandlerOptions = {}) {
  const logger = options.logger ?? new Logger({ serviceName: 'storage-consumer', persistentKeys: { function: 'migrate' } });
  const setup = readSetup(options);
  const migrationLog = {
    info: (message: string, extra: object = {}) => logger.info(message, { ...extra }),
    warn: (message: string, extra: object = {}) => logger.warn(message, { ...extra }),
  };

  const migrate = async (context: Context): Promise<MigrationReport> => {
    if (!setup.ok) throw setup.error;
    const budgetMs = context.getRemainingTimeInMillis() - RESPONSE_RESERVE_MS;
    if (budgetMs < 2 * SERVER_TIMEOUT_MARGIN_MS) {
      throw new Error(`the function's timeout leaves ${Math.max(0, budgetMs / 1000).toFixed(1)} s to migrate: raise it`);
    }
    const { source, directory } = setup;
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new Error(`migrations did not finish within ${Math.round(budgetMs / 1000)} s (the function's timeout)`)),
      budgetMs,
    );
    // Below the budget, so the server stops a statement or a lock wait by itself should this
    // container be frozen or killed before it could cancel them.
    const serverBound = budgetMs - SERVER_TIMEOUT_MARGIN_MS;
    const once = async () => {
      const database = await source.settings();
      const connection = migrationConnection(database, {
        statementTimeoutMs: serverBound,
        lockTimeoutMs: Math.min(serverBound, database.migrationLockTimeoutMs),
      });
      return runMigrations({ ...connection, directory, logger: migrationLog, signal: deadline.signal });
    };
    try {
      return await once();
    } catch (error) {
      // 28P01: the secret was rotated under this container; read it again, once.
      if (!isAuthenticationFailure(error) || !source.refresh || deadline.signal.aborted) throw error;
      logger.warn('database authentication failed; re-reading the secret once');
      await source.refresh();
      return await once();
    } finally {
      clearTimeout(timer);
    }
  };

  const answer = async (event: CloudFormationCustomResourceEvent, context: Context): Promise<CustomResourceOutcome> => {
    if (event.RequestType === 'Delete') {
      logger.info('custom resource deleted; the schema and its data are kept');
      return { status: 'SUCCESS', reason: 'schema kept' };
    }
    if (!setup.ok) throw setup.error;
    const bundledHash = await migrationsHash(setup.directory);
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
    const report = await migrate(context);
    return {
      status: 'SUCCESS',
      reason: `applied ${report.applied.length}, already applied ${report.alreadyApplied}`,
      data: { MigrationsHash: bundledHash, Applied: report.applied.map((file) => file.version).join(',') },
    };
  };

  return middy(async (event: unknown, context: Context): Promise<MigrationReport | undefined> => {
    if (!isCustomResourceEvent(event)) return migrate(context);
    logger.info('custom resource request', { requestType: event.RequestType, logicalResourceId: event.LogicalResourceId });
    let outcome: CustomResourceOutcome;
    try {
      outcome = await answer(event, context);
    } catch (error) {
      logger.error('migration failed', { error: error instanceof Error ? error : String(error) });
      outcome = { status: 'FAILED', reason: messageOf(error) };
    }
    await sendCustomResourceResponse(event.ResponseURL, customResourceResponse(event, outcome, context.logStreamName), {
      onRetry: (attempt, error) => logger.warn('ResponseURL not reached; retrying', { attempt, error: String(error) }),
    });
    logger.info('custom resource answered', { status: outcome.status });
    return undefined;
  }).use(injectLambdaContext(logger));
}
