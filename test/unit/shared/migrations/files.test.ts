import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MigrationError } from '../../../../shared/errors.js';
import {
  DEFAULT_MIGRATIONS_DIRECTORY,
  loadMigrations,
  migrationsHash,
  orderMigrationFileNames,
  parseMigrationFileName,
} from '../../../../shared/migrations/index.js';
const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

function thrownBy(action: () => unknown): Error {
  try {
    action();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the action to throw');
}

const directories: string[] = [];
async function directoryWith(files: Record<string, string | Buffer>): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'migrations-unit-'));
  directories.push(directory);
  for (const [name, content] of Object.entries(files)) {
    await writeFile(join(directory, name), content);
  }
  return directory;
}

afterEach(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('parseMigrationFileName', () => {
  it.each([
    ['0001_app_stats.sql', 1, 'app_stats'],
    ['0004_dead_letter_events.sql', 4, 'dead_letter_events'],
    ['0012_add-index_2.sql', 12, 'add-index_2'],
  ])('parses %s', (fileName, version, name) => {
    expect(parseMigrationFileName(fileName)).toEqual({ version, name, fileName });
  });

  it.each([
    'app_stats.sql',
    '1_app_stats.sql',
    '001_app_stats.sql',
    '00001_app_stats.sql',
    '0001-app_stats.sql',
    '0001_.sql',
    '0001_App_Stats.sql',
    '0001_app stats.sql',
    '0001_app_stats.SQL',
    '0001_app_stats.sql.bak',
    '0001_app_stats',
    'README.md',
  ])('rejects the malformed name %s, naming it', (fileName) => {
    const error = thrownBy(() => parseMigrationFileName(fileName));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain(`"${fileName}"`);
  });

  it('rejects version 0000', () => {
    expect(() => parseMigrationFileName('0000_init.sql')).toThrow(/versions start at 0001/);
  });
});

describe('orderMigrationFileNames', () => {
  it('returns the files in version order, whatever order the directory listed them in', () => {
    const ordered = orderMigrationFileNames(['0003_c.sql', '0001_a.sql', '0004_d.sql', '0002_b.sql']);

    expect(ordered.map((file) => file.fileName)).toEqual(['0001_a.sql', '0002_b.sql', '0003_c.sql', '0004_d.sql']);
  });

  it('rejects two files with one version, naming both', () => {
    const error = thrownBy(() => orderMigrationFileNames(['0001_a.sql', '0002_b.sql', '0002_other.sql']));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toMatch(/duplicate migration version 2: 0002_(b|other)\.sql and 0002_(b|other)\.sql/);
  });

  it('rejects a gap, naming the missing version', () => {
    const error = thrownBy(() => orderMigrationFileNames(['0001_a.sql', '0002_b.sql', '0004_d.sql']));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toBe('migration version 3 is missing: found 0004_d.sql after 0002_b.sql');
  });

  it('rejects a sequence that does not start at 1', () => {
    expect(() => orderMigrationFileNames(['0002_b.sql', '0003_c.sql'])).toThrow('migration version 1 is missing: found 0002_b.sql first');
  });

  it('rejects an empty list (a wrong directory must not look like "nothing to do")', () => {
    expect(() => orderMigrationFileNames([])).toThrow(MigrationError);
  });

  it('rejects the whole list when one name is malformed', () => {
    expect(() => orderMigrationFileNames(['0001_a.sql', '0002_b.sql', 'notes.txt'])).toThrow(/"notes\.txt"/);
  });
});

describe('loadMigrations', () => {
  it("loads the repository's migrations by default directory", async () => {
    const files = await loadMigrations(DEFAULT_MIGRATIONS_DIRECTORY);

    // The first six in order; a later migration only follows them.
    expect(files.map((file) => file.version)).toEqual(files.map((_, index) => index + 1));
    expect(files.slice(0, 6).map((file) => [file.version, file.name])).toEqual([
      [1, 'app_stats'],
      [2, 'reviews'],
      [3, 'network_metrics'],
      [4, 'dead_letter_events'],
      [5, 'operator_actions'],
      [6, 'pipeline_pauses'],
    ]);
  });

  it("reads each file's text and the sha256 hex of its bytes; hidden files are ignored", async () => {
    const first = 'CREATE TABLE a (id INTEGER);\n';
    const second = Buffer.from('\uFEFF-- caf\u00e9\nCREATE TABLE b (id INTEGER);\n', 'utf8');
    const directory = await directoryWith({ '0002_b.sql': second, '0001_a.sql': first, '.gitkeep': '' });

    const files = await loadMigrations(directory);

    expect(files.map((file) => file.fileName)).toEqual(['0001_a.sql', '0002_b.sql']);
    expect(files[0]).toMatchObject({ sql: first, checksum: sha256(first), path: join(directory, '0001_a.sql') });
    // The checksum covers the file's exact bytes (BOM included); the SQL text drops the BOM.
    expect(files[1]).toMatchObject({ sql: '-- caf\u00e9\nCREATE TABLE b (id INTEGER);\n', checksum: sha256(second) });
  });

  it('rejects a stray file that is not a migration, naming it and the directory', async () => {
    const directory = await directoryWith({ '0001_a.sql': 'SELECT 1;', 'README.md': '# notes' });

    await expect(loadMigrations(directory)).rejects.toThrow(
      expect.objectContaining({ name: 'MigrationError', message: expect.stringContaining('"README.md"') }),
    );
    await expect(loadMigrations(directory)).rejects.toThrow(directory);
  });

  it('rejects a file that is not UTF-8, naming it', async () => {
    const directory = await directoryWith({ '0001_a.sql': Buffer.from([0x53, 0x45, 0xff, 0x4c]) });

    await expect(loadMigrations(directory)).rejects.toThrow('migration 0001_a.sql is not valid UTF-8');
  });

  it('rejects a directory that does not exist', async () => {
    await expect(loadMigrations(join(tmpdir(), 'no-such-migrations-directory'))).rejects.toThrow(/cannot read the migrations directory/);
  });
});

describe('migrationsHash', () => {
  it('is equal for equal directories and changes when a file is edited or renamed', async () => {
    const original = await directoryWith({ '0001_a.sql': 'SELECT 1;', '0002_b.sql': 'SELECT 2;' });
    const copy = await directoryWith({ '0001_a.sql': 'SELECT 1;', '0002_b.sql': 'SELECT 2;' });
    const edited = await directoryWith({ '0001_a.sql': 'SELECT 1;', '0002_b.sql': 'SELECT 2; ' });
    const renamed = await directoryWith({ '0001_a.sql': 'SELECT 1;', '0002_c.sql': 'SELECT 2;' });

    const hash = await migrationsHash(original);

    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(await migrationsHash(copy)).toBe(hash);
    expect(await migrationsHash(edited)).not.toBe(hash);
    expect(await migrationsHash(renamed)).not.toBe(hash);
  });
});
