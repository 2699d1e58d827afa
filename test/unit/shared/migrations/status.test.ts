import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { compareWithApplied } from '../../../../shared/migrations/index.js';
import type { AppliedMigration, MigrationFile } from '../../../../shared/migrations/index.js';
const directories: string[] = [];
afterEach(async () => {
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })));
});

describe('compareWithApplied', () => {
  const file = (version: number, name: string, checksum: string): MigrationFile => ({
    version,
    name,
    fileName: `${String(version).padStart(4, '0')}_${name}.sql`,
    path: `/m/${name}`,
    checksum,
    sql: '',
  });
  const row = (version: number, name: string, checksum: string): AppliedMigration => ({
    version,
    name,
    checksum,
    appliedAt: new Date(0),
  });
  const files = [file(1, 'a', 'h1'), file(2, 'b', 'h2'), file(3, 'c', 'h3')];

  it('lists unapplied versions as pending', () => {
    const status = compareWithApplied(files, [row(1, 'a', 'h1')]);

    expect(status).toMatchObject({ pending: [2, 3], mismatches: [], unknownApplied: [], upToDate: false });
  });

  it('reports a changed checksum and a renamed file as mismatches', () => {
    const status = compareWithApplied(files, [row(1, 'a', 'old'), row(2, 'old_name', 'h2'), row(3, 'c', 'h3')]);

    expect(status.mismatches).toEqual([
      { version: 1, fileName: '0001_a.sql', field: 'checksum', expected: 'old', actual: 'h1' },
      { version: 2, fileName: '0002_b.sql', field: 'name', expected: 'old_name', actual: 'b' },
    ]);
    expect(status.upToDate).toBe(false);
  });

  it('reports versions newer than the code without calling the schema out of date', () => {
    const applied = [row(1, 'a', 'h1'), row(2, 'b', 'h2'), row(3, 'c', 'h3'), row(4, 'd', 'h4')];

    const status = compareWithApplied(files, applied);

    expect(status).toMatchObject({ pending: [], mismatches: [], unknownApplied: [4], upToDate: true });
  });
});
