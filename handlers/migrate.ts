/**
 * The Lambda entry of the `migrate` function (serverless.yml, `handlers/migrate.handler`): the
 * handler itself is aws/migration-handler.ts's.
 */
import { createMigrationHandler } from '../aws/migration-handler.js';

/** Lambda entry: the deploy-time migration custom resource, or a direct invoke. */
export const handler = createMigrationHandler();
