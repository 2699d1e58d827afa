/**
 * The migrations' hashes: a file's checksum, which the tracking table stores and every run compares
 * (a changed applied file is refused), and one hash of a whole set, the migration custom resource's
 * property (deploy/migrations-hash.js computes it at package time, aws/migration-handler.ts from
 * the bundled files).
 */
import { createHash } from 'node:crypto';
import type { MigrationFile } from './model.js';

/** sha256 hex of a migration file's bytes, as stored in the tracking table's `checksum`. */
export function checksumOf(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * One hash for a whole set of migrations: sha256 hex over `<fileName> <checksum>\n` per file,
 * in version order. Deploy tooling uses it to notice that `migrations/` changed (e.g. as a
 * property of the custom resource that runs them).
 */
export function hashMigrationSet(files: ReadonlyArray<Pick<MigrationFile, 'fileName' | 'checksum'>>): string {
  const hash = createHash('sha256');
  for (const file of files) {
    hash.update(`${file.fileName} ${file.checksum}\n`);
  }
  return hash.digest('hex');
}
