/**
 * What serverless.yml computes from migrations/ at package time for the migration custom
 * resource (`${file(./deploy/migrations-hash.js):migrationsHash}`, `...:latestMigration`). Plain
 * JavaScript because osls loads variable files with require(); the TypeScript it needs is loaded
 * through tsx, so both values are the migration runner's own.
 */
import { fileURLToPath } from 'node:url';
import { tsImport } from 'tsx/esm/api';

const directory = () => fileURLToPath(import.meta.resolve('../migrations/'));

/** sha256 over migrations/ (names and checksums): the migration custom resource's property. */
export async function migrationsHash() {
  const files = await tsImport('../shared/migrations/files.ts', import.meta.url);
  return files.migrationsHash(directory());
}

/**
 * The highest version in migrations/: only grows from release to release, so an Update whose
 * `LatestMigration` is below its `OldResourceProperties`' is a rollback (aws/migration-handler.ts).
 */
export async function latestMigration() {
  const files = await tsImport('../shared/migrations/files.ts', import.meta.url);
  const loaded = /** @type {Array<{ version: number }>} */ (await files.loadMigrations(directory()));
  return Math.max(0, ...loaded.map((file) => file.version));
}
