#!/usr/bin/env node
/* global process, URL, console */
// `storage-consumer` (`npx storage-consumer <command>`): runs the TypeScript command line in
// cli/ through tsx, on Node 24. An older `node` first on the PATH hands over to the repository's
// own Node 24 (the `node` dev dependency) and forwards signals to it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REQUIRED_MAJOR = 24;

if (Number(process.versions.node.split('.')[0]) < REQUIRED_MAJOR) {
  const node = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  const child = spawn(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('error', (error) => {
    console.error(`storage-consumer needs Node ${REQUIRED_MAJOR}: run npm ci first (${error.message})`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { runCli } = await import('../cli/main.ts');
  await runCli(process.argv.slice(2));
}
