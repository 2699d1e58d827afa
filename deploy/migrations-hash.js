/**
 * The migrations hash serverless.yml computes at package time
 * (`${file(./deploy/migrations-hash.js):migrationsHash}`). Plain JavaScript because osls loads
 * variable files with require(); the TypeScript it needs is loaded through tsx, so the hash is
 * the migration runner's own.
 */
import { fileURLToPath } from 'node:url';
import { tsImport } from 'tsx/esm/api';

/** sha256 over migrations/ (names and checksums): the migration custom resource's property. */
export async function migrationsHash() {
  const files = await tsImport('../shared/migrations/files.ts', import.meta.url);
  return files.migrationsHash(fileURLToPath(import.meta.resolve('../migrations/')));
}
