#!/usr/bin/env node
/* global process, console, URL */
// `npm run build [-- --outdir DIR]`: JavaScript for the host and the operations CLI (which holds
// the migration runner: `storage-consumer migrate`), so that they run on production dependencies
// alone (no tsx, no TypeScript). One ES module per entry point (plus the chunks they share or load
// lazily), our code bundled and every package left to node_modules (`npm ci --omit=dev` installs exactly those).
//
//   dist/cli/main.js    storage-consumer <command>  (bin/storage-consumer.js prefers it)
//   dist/host/main.js   the host: node dist/host/main.js (a container's PID 1)
//
// Every output sits two folders below the package root, like its source, because the code finds
// the package's migrations/ relative to its own file (`new URL('../../migrations/', import.meta.url)`).
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The entry points, by source path; each is written to the same path under the output folder. */
export const ENTRY_POINTS = ['cli/main.ts', 'host/main.ts'];

/**
 * Builds into `outdir` (default `<root>/dist`), replacing what was there.
 * @returns the files written, relative to `outdir`.
 */
export async function buildDist(outdir = path.join(root, 'dist')) {
  await rm(outdir, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: ENTRY_POINTS,
    outbase: root,
    outdir,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node24',
    sourcemap: 'linked',
    // Each CLI command is loaded when it runs (cli/main.ts): with splitting, a dynamic import is a
    // chunk of its own, and so are the packages it imports (a bundle hoists every package import to
    // its top, so `--version` and `healthcheck` would load kafkajs, pg and the AWS SDK). Chunks go
    // to dist/chunks/, two folders below the package root like every output (see above).
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    metafile: true,
    logLevel: 'warning',
  });
  // A stamp the bin compares with the sources' modification times (stale builds are not run).
  await writeFile(path.join(outdir, 'BUILD'), `${new Date().toISOString()}\n`);
  return Object.keys(result.metafile.outputs).map((file) => path.relative(outdir, path.resolve(root, file)));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { outdir: { type: 'string' } } });
  const outdir = values.outdir === undefined ? undefined : path.resolve(values.outdir);
  const files = await buildDist(outdir);
  console.log(
    `built ${files.filter((file) => file.endsWith('.js')).join(', ')} in ` +
      `${path.relative(process.cwd(), outdir ?? path.join(root, 'dist')) || '.'}`,
  );
}
