import { fileURLToPath } from 'node:url';
import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent, CloudFormationCustomResourceUpdateEvent, Context } from 'aws-lambda';
import { isAuthenticationFailure } from '../shared/error-classification.js';
import { loggedError } from '../shared/errors.js';
import { hashMigrationSet } from '../shared/migrations/checksum.js';
import { loadMigrations } from '../shared/migrations/files.js';
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
import { redactConnectionDetails, redactErrorText } from '../shared/redaction.js';

/**
 * `migrations/` next to `handlers/`: true in the repository and in the function's package, where
 * the SQL files are shipped beside the bundle (`package.patterns` in serverless.yml).
 */
const BUNDLED_MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));

/**
 * The migration's deadline lies this far before the function's timeout: up to 10 s to end the
 * migration session (see `endSession`), then the answer to CloudFormation.
 */
const MIGRATION_RESERVE_MS = 20_000;

/**
 * CloudFormation is answered this far before the function's timeout whatever the migration is
 * doing: the guard's FAILED if no outcome came by then (something ignored the deadline).
 */
const ANSWER_RESERVE_MS = 8_000;

/** Every response attempt has ended this far before the function's timeout. */
const RESPONSE_MARGIN_MS = 1_000;

/** One response attempt's bound: a presigned S3 URL answers in well under a second. */
const RESPONSE_ATTEMPT_TIMEOUT_MS = 3_000;

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

/** The migrations a request asks for: `LatestMigration`, the highest version in its release's `migrations/`. */
function latestMigrationOf(properties: Record<string, unknown> | undefined): number | undefined {
  const value = properties?.LatestMigration;
  const number = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  return Number.isSafeInteger(number) ? number : undefined;
}

/**
 * True when an Update asks for older migrations than the request before it: CloudFormation
 * rolling back (or an older release deployed). Decided from the request alone, so the same
 * answer comes from the new code and the old, and with no database at hand: a rollback after a
 * failed connection must not need that connection. A request without `LatestMigration` after
 * one with it comes from a release before the property existed, which is older too.
 */
function asksForOlderMigrations(event: CloudFormationCustomResourceUpdateEvent): boolean {
  const requested = latestMigrationOf(event.ResourceProperties);
  const previous = latestMigrationOf(event.OldResourceProperties);
  if (previous === undefined) return false;
  return requested === undefined || requested < previous;
}

/** The bundled migrations as the custom resource describes them. */
async function bundledRelease(directory: string): Promise<{ hash: string; latest: number }> {
  const files = await loadMigrations(directory);
  return { hash: hashMigrationSet(files), latest: Math.max(0, ...files.map((file) => file.version)) };
}

/**
 * The `migrate` function. Invoked by the deploy-time custom resource, it answers the
 * ResponseURL itself, exactly once: Create/Update migrate and report SUCCESS, or FAILED with the
 * error's message (which rolls the deploy back before any consumer is touched); an Update asking
 * for older migrations than the one before it (a rollback) and Delete are SUCCESS without
 * touching the schema. Invoked directly (`sls invoke -f migrate`), it migrates and returns the
 * report, or fails.
 *
 * CloudFormation is never left waiting: a bad setting does not stop the module from loading,
 * it is answered as FAILED naming the variable; the secret read and the migration run under one
 * deadline, at which the migration is stopped for good (statement cancelled, transaction rolled
 * back, lock released) before FAILED is answered, so a migration that answered FAILED never
 * commits afterwards; whatever ignores that deadline, FAILED is answered 8 s before the
 * function's timeout; a response PUT that fails is retried until 1 s before it, then logged.
 */
export function createMigrationHandler(options: MigrationHandlerOptions = {}) {
  const logger =
    options.logger ??
    new Logger({ serviceName: 'storage-consumer', persistentKeys: { function: 'migrate' }, jsonReplacerFn: redactErrorText });
  const setup = readSetup(options);
  const migrationLog = {
    info: (message: string, extra: object = {}) => logger.info(message, { ...extra }),
    warn: (message: string, extra: object = {}) => logger.warn(message, { ...extra }),
  };

  /** Migrates within the time left before `endsAt` (the function's timeout, epoch ms). */
  const migrate = async (endsAt: number): Promise<MigrationReport> => {
    if (!setup.ok) throw setup.error;
    const budgetMs = endsAt - Date.now() - MIGRATION_RESERVE_MS;
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
      // Under the deadline too: a Secrets Manager endpoint that never answers is abandoned at it.
      const database = await source.settings({ signal: deadline.signal });
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

  const answer = async (event: CloudFormationCustomResourceEvent, endsAt: number): Promise<CustomResourceOutcome> => {
    if (event.RequestType === 'Delete') {
      logger.info('custom resource deleted; the schema and its data are kept');
      return { status: 'SUCCESS', reason: 'schema kept' };
    }
    if (event.RequestType === 'Update' && asksForOlderMigrations(event)) {
      const requested = latestMigrationOf(event.ResourceProperties);
      const previous = latestMigrationOf(event.OldResourceProperties);
      logger.warn('the update asks for older migrations than the one before it (a rollback); leaving the schema as it is', {
        requestedLatestMigration: requested ?? null,
        previousLatestMigration: previous ?? null,
      });
      return {
        status: 'SUCCESS',
        reason: `rollback to migrations up to ${requested ?? 'an older release'} from ${previous}: schema left as it is`,
        data: { MigrationsHash: String(event.ResourceProperties.MigrationsHash ?? ''), LatestMigration: String(requested ?? '') },
      };
    }
    if (!setup.ok) throw setup.error;
    const bundled = await bundledRelease(setup.directory);
    const requestedHash: unknown = event.ResourceProperties.MigrationsHash;
    if (event.RequestType === 'Update' && requestedHash !== bundled.hash) {
      // The new code answering a rollback's old properties that carry no LatestMigration (a
      // release from before it). Migrations only go forward, and the schema they left stays compatible.
      logger.warn('migrations hash differs from the bundled files (a rollback); leaving the schema as it is', {
        requestedHash,
        bundledHash: bundled.hash,
      });
      return { status: 'SUCCESS', reason: 'rollback: schema left as it is', data: { MigrationsHash: bundled.hash } };
    }
    const report = await migrate(endsAt);
    return {
      status: 'SUCCESS',
      reason: `applied ${report.applied.length}, already applied ${report.alreadyApplied}`,
      data: {
        MigrationsHash: bundled.hash,
        LatestMigration: String(bundled.latest),
        Applied: report.applied.map((file) => file.version).join(','),
      },
    };
  };

  /**
   * The outcome of `answer`, or FAILED at `ANSWER_RESERVE_MS` before the timeout if it has not
   * come by then: whichever is first is the one answer CloudFormation gets.
   */
  const outcomeInTime = async (event: CloudFormationCustomResourceEvent, endsAt: number): Promise<CustomResourceOutcome> => {
    let guard: NodeJS.Timeout | undefined;
    const late = new Promise<CustomResourceOutcome>((resolve) => {
      guard = setTimeout(
        () => {
          const reason = `no outcome ${Math.round(ANSWER_RESERVE_MS / 1000)} s before the function's timeout; answering FAILED`;
          logger.error('migration did not settle in time', { reason });
          resolve({ status: 'FAILED', reason: `the migration did not settle: ${reason}` });
        },
        Math.max(0, endsAt - Date.now() - ANSWER_RESERVE_MS),
      );
    });
    const settled = answer(event, endsAt).catch((error: unknown): CustomResourceOutcome => {
      logger.error('migration failed', { error: error instanceof Error ? error : String(error) });
      // Stack events are read by whoever may describe the stack: the one redaction, as in every log line and CLI error.
      return { status: 'FAILED', reason: redactConnectionDetails(messageOf(error)) };
    });
    try {
      return await Promise.race([settled, late]);
    } finally {
      clearTimeout(guard);
    }
  };

  return middy(async (event: unknown, context: Context): Promise<MigrationReport | undefined> => {
    const endsAt = Date.now() + context.getRemainingTimeInMillis();
    if (!isCustomResourceEvent(event)) return migrate(endsAt);
    logger.info('custom resource request', { requestType: event.RequestType, logicalResourceId: event.LogicalResourceId });
    const outcome = await outcomeInTime(event, endsAt);
    const response = customResourceResponse(event, outcome, context);
    try {
      await sendCustomResourceResponse(event.ResponseURL, response, {
        deadline: endsAt - RESPONSE_MARGIN_MS,
        timeoutMs: RESPONSE_ATTEMPT_TIMEOUT_MS,
        onRetry: (attempt, error) => logger.warn('ResponseURL not reached; retrying', { attempt, ...loggedError(error) }),
      });
    } catch (error) {
      // Nothing more can be done from here: CloudFormation fails the resource at its ServiceTimeout.
      logger.error('custom resource response not delivered; CloudFormation waits for the ServiceTimeout', {
        status: outcome.status,
        error: messageOf(error),
      });
      return undefined;
    }
    logger.info('custom resource answered', { status: outcome.status, reason: response.Reason });
    return undefined;
  }).use(injectLambdaContext(logger));
}
