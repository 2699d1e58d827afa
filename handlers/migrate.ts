import { createMigrationHandler } from '../aws/migration-handler.js';

/** Lambda entry: the deploy-time migration custom resource, or a direct invoke. */
export const handler = createMigrationHandler();
