/**
 * The settings reference (docs/settings.md) and README's common-settings block: generated from
 * the declarations, and `npm run lint` fails when either is stale.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { catalogEntries, CROSS_CONSTRAINTS } from '../../../config/setting-declarations.js';
import {
  generatedFiles,
  README_FILE,
  REFERENCE_FILE,
  renderReadmeBlock,
  renderSettingsReference,
  staleFiles,
} from '../../../scripts/settings-doc.js';

const ROOT = new URL('../../../', import.meta.url);
const folders: string[] = [];

afterEach(async () => {
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

/** Copies of the README and the reference in a temporary folder, as `npm run settings:doc` would see them. */
async function copies(reference: string) {
  const folder = await mkdtemp(join(tmpdir(), 'settings-doc-'));
  folders.push(folder);
  const readme = join(folder, 'README.md');
  const doc = join(folder, 'settings.md');
  await writeFile(readme, await readFile(README_FILE, 'utf8'));
  await writeFile(doc, reference);
  return { readme, doc };
}

describe('the settings reference', () => {
  it('is what npm run settings:doc generates, in docs/ and in the README', async () => {
    expect(await staleFiles(await generatedFiles())).toEqual([]);
  });

  it('lists every entry once, the common ones before the advanced ones, with its rules', () => {
    const reference = renderSettingsReference();
    const common = reference.indexOf('## Common settings');
    const advanced = reference.indexOf('## Advanced settings');
    expect(common).toBeGreaterThan(0);
    expect(advanced).toBeGreaterThan(common);
    for (const entry of catalogEntries()) {
      const row = `\n| \`${entry.name}\` |`;
      const at = reference.indexOf(row);
      expect(at, entry.name).toBeGreaterThan(0);
      expect(reference.indexOf(row, at + 1), `${entry.name} listed twice`).toBe(-1);
      expect(entry.tier === 'common' ? at < advanced : at > advanced, entry.name).toBe(true);
    }
    for (const constraint of CROSS_CONSTRAINTS) expect(reference).toContain(`* ${constraint.rule}`);
    expect(reference).toContain("the Lambda event source mapping's `BatchSize`");
  });

  it('puts only the common settings in the README, with the link to the reference', () => {
    const block = renderReadmeBlock();
    for (const entry of catalogEntries()) {
      expect(block.includes(`| \`${entry.name}\` |`), entry.name).toBe(entry.tier === 'common');
    }
    expect(block).toContain('[docs/settings.md](docs/settings.md)');
  });

  it('finds a stale or missing reference, naming the file and the fix', async () => {
    // Prepare: a reference edited by hand, and one never generated
    const edited = await copies(renderSettingsReference().replace('| 5000 |', '| 6000 |'));
    const missing = await copies('');
    await rm(missing.doc);

    // Act
    const stale = await staleFiles(await generatedFiles(edited.readme, edited.doc));
    const absent = await staleFiles(await generatedFiles(missing.readme, missing.doc));
    const current = await staleFiles(await generatedFiles(edited.readme, (await copies(renderSettingsReference())).doc));

    // Assess
    expect(stale).toEqual([`${edited.doc} is stale: run npm run settings:doc (and commit it)`]);
    expect(absent).toEqual([`${missing.doc} is missing: run npm run settings:doc (and commit it)`]);
    expect(current).toEqual([]);
  });

  it('finds a README whose generated block was edited by hand', async () => {
    const { readme, doc } = await copies(renderSettingsReference());
    await writeFile(readme, (await readFile(readme, 'utf8')).replace('| `KAFKA_BROKERS` |', '| `KAFKA_BROKER` |'));
    expect(await staleFiles(await generatedFiles(readme, doc))).toEqual([`${readme} is stale: run npm run settings:doc (and commit it)`]);
  });

  // Spawns `npx tsx` twice (a TypeScript start each): seconds, many more on a loaded machine.
  it('is checked by npm run lint, which exits 1 naming the stale file', { timeout: 60_000 }, async () => {
    // Prepare
    const pkg = JSON.parse(await readFile(new URL('package.json', ROOT), 'utf8')) as { scripts: Record<string, string> };
    const { readme, doc } = await copies(renderSettingsReference().replace('| 5000 |', '| 6000 |'));
    const check = (...args: string[]) =>
      promisify(execFile)('npx', ['tsx', 'scripts/settings-doc.ts', '--check', ...args], { cwd: ROOT }).then(
        ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
        (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, output: error.stdout + error.stderr }),
      );

    // Act: the check as lint runs it, on the repository as it is, and on a stale copy
    const repository = await check();
    const staleCopy = await check('--readme', readme, '--reference', doc);

    // Assess
    expect(pkg.scripts.lint).toContain('tsx scripts/settings-doc.ts --check');
    expect(pkg.scripts['settings:doc']).toBe('tsx scripts/settings-doc.ts');
    expect(repository).toEqual({ code: 0, output: '' });
    expect(staleCopy).toEqual({ code: 1, output: `settings reference: ${doc} is stale: run npm run settings:doc (and commit it)\n` });
    expect(REFERENCE_FILE.endsWith('docs/settings.md')).toBe(true);
  });
});
