/**
 * The migration files on disk: their names parsed (`NNNN_name.sql`) and checked to be one
 * contiguous sequence from 0001, their bytes read as UTF-8 with their checksums, and the hash of a
 * directory for deploy tooling.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { MigrationError } from '../errors.js';
import { checksumOf, hashMigrationSet } from './checksum.js';
import type { MigrationFile } from './model.js';

const FILE_NAME = /^(\d{4})_([a-z0-9][a-z0-9_-]*)\.sql$/;

/** A migration file name, parsed: `0002_reviews.sql` -> `{ version: 2, name: 'reviews' }`. */
export interface MigrationFileName {
  readonly version: number;
  readonly name: string;
  readonly fileName: string;
}

/**
 * Parses `NNNN_name.sql` (four digits, then a lower-case name of letters, digits, `_` and `-`).
 * @throws MigrationError when the name does not follow the pattern or the number is 0000.
 */
export function parseMigrationFileName(fileName: string): MigrationFileName {
  const match = FILE_NAME.exec(fileName);
  if (!match?.[1] || !match[2]) {
    throw new MigrationError(`malformed migration file name "${fileName}": expected NNNN_name.sql (e.g. 0005_add_index.sql)`);
  }
  const version = Number(match[1]);
  if (version === 0) {
    throw new MigrationError(`malformed migration file name "${fileName}": versions start at 0001`);
  }
  return { version, name: match[2], fileName };
}

/**
 * Parses every name and returns them in version order, validated: at least one file, no two
 * files with one version, versions contiguous from 1.
 * @throws MigrationError naming the offending file(s) or the missing version.
 */
export function orderMigrationFileNames(fileNames: readonly string[]): MigrationFileName[] {
  if (fileNames.length === 0) {
    throw new MigrationError('no migration files found');
  }
  const ordered = fileNames.map(parseMigrationFileName).sort((a, b) => a.version - b.version);
  ordered.forEach((file, index) => {
    const previous = ordered[index - 1];
    if (previous?.version === file.version) {
      throw new MigrationError(`duplicate migration version ${file.version}: ${previous.fileName} and ${file.fileName}`);
    }
    const expected = index + 1;
    if (file.version !== expected) {
      throw new MigrationError(
        `migration version ${expected} is missing: ` + `found ${file.fileName} ${previous ? `after ${previous.fileName}` : 'first'}`,
      );
    }
  });
  return ordered;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Lists, validates and reads the migration files of a directory, in version order. Every entry
 * except hidden ones (`.gitkeep`) must be a migration file, so a typo cannot be skipped silently.
 * @throws MigrationError on a malformed name, a gap, a duplicate, an empty directory or a file
 *   that is not UTF-8.
 */
export async function loadMigrations(directory: string): Promise<MigrationFile[]> {
  const absolute = resolve(directory);
  let entries: string[];
  try {
    entries = await readdir(absolute);
  } catch (error) {
    throw new MigrationError(`cannot read the migrations directory ${absolute}`, { cause: error });
  }
  const names = entries.filter((entry) => !entry.startsWith('.'));
  let ordered: MigrationFileName[];
  try {
    ordered = orderMigrationFileNames(names);
  } catch (error) {
    throw new MigrationError(`${(error as Error).message} (in ${absolute})`, { cause: error });
  }
  return Promise.all(
    ordered.map(async ({ version, name, fileName }) => {
      const path = join(absolute, fileName);
      const bytes = await readFile(path);
      let sql: string;
      try {
        sql = utf8.decode(bytes);
      } catch (error) {
        throw new MigrationError(`migration ${fileName} is not valid UTF-8`, { cause: error });
      }
      return { version, name, fileName, path, checksum: checksumOf(bytes), sql };
    }),
  );
}

/**
 * The hash of a migrations directory (see `hashMigrationSet`): changes when a file is added,
 * renamed or edited. For deploy tooling.
 */
export async function migrationsHash(directory: string): Promise<string> {
  return hashMigrationSet(await loadMigrations(directory));
}
