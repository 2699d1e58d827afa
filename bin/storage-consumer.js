#!/usr/bin/env node
/* global process, URL, console, setTimeout */
// `storage-consumer` (`npx storage-consumer <command>`), on Node 24. It runs the built command
// line (dist/cli/main.js, `npm run build`) where it exists: that is all a production install
// (`npm ci --omit=dev`) has. In a checkout it runs the TypeScript sources in cli/ through tsx
// when there is no build, or when a source file changed after the build (a stale build never
// runs silently). Another major than 24 first on the PATH (older or newer) hands over to the
// repository's own Node 24 (the `node` dev dependency) with Node's own flags, forwards SIGINT,
// SIGTERM and SIGHUP to it, and exits with its code, or dies of the signal it died of; where
// there is none (a production install), it refuses to run (exit 1): the code is tested on, and
// deployed to, the Lambda runtime's major only. package.json has no `engines` on purpose: npm
// checks it against the Node npm itself runs on, and warns on every `npx` (see README).
// `reconcile` runs the same way in a child with the host's memory flags, when they were not given.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';

const REQUIRED_MAJOR = 24;
const BUILT = new URL('../dist/cli/main.js', import.meta.url);
const BUILD_STAMP = new URL('../dist/BUILD', import.meta.url);
/** The folders the build bundles; absent in a production install. */
const SOURCES = ['cli', 'config', 'host', 'host-api', 'kafka', 'invoke', 'shared', 'aws'].map(
  (folder) => new URL(`../${folder}/`, import.meta.url),
);

/** Modification time in ms, or undefined when the file does not exist. */
function modified(url) {
  try {
    return statSync(url).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Whether a TypeScript source is newer than the build (only where the sources exist). */
function sourcesNewerThan(time) {
  for (const folder of SOURCES) {
    let files;
    try {
      files = readdirSync(folder, { recursive: true });
    } catch {
      continue;
    }
    for (const file of files) {
      if (String(file).endsWith('.ts') && (modified(new URL(String(file), folder)) ?? 0) > time) return true;
    }
  }
  return false;
}

/**
 * Runs this program again in a child `node` with `execArgv`, forwards SIGINT, SIGTERM and SIGHUP
 * to it, and exits with its code, or dies of the signal it died of.
 */
function handOver(node, execArgv) {
  const child = spawn(node, [...execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, forward);
  child.on('error', (error) => {
    console.error(`storage-consumer needs Node ${REQUIRED_MAJOR}: run npm ci first (${error.message})`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (code !== null) process.exit(code);
    // Died of a signal: die of the same one, so whoever started us sees what happened.
    for (const name of signals) process.off(name, forward);
    process.kill(process.pid, signal ?? 'SIGTERM');
    // A signal that does not end this process (ignored, or handled elsewhere): the shell's convention.
    setTimeout(() => process.exit(128 + (osConstants.signals[signal] ?? 0)), 1000).unref();
  });
}

/**
 * The host's memory flags (the Dockerfile's ENTRYPOINT, `npm run host`; docs/design.md, "Memory"),
 * for the commands that read a whole topic (`reconcile`): a small young generation keeps the
 * peak RSS of a million-record run bounded. Node takes them only at start, so such a command
 * runs in a child that has them, unless they were given already.
 */
const HOST_NODE_FLAGS = ['--max-semi-space-size=4', '--heap-growing-percent=150'];
const TOPIC_READING_COMMANDS = new Set(['reconcile']);

const projectNode = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
const wrongMajor = Number(process.versions.node.split('.')[0]) !== REQUIRED_MAJOR;
// The project's own Node on another major too (a stale install) must not hand over to itself.
if (wrongMajor && (!existsSync(projectNode) || realpathSync(projectNode) === realpathSync(process.execPath))) {
  console.error(
    `storage-consumer runs on Node ${REQUIRED_MAJOR} (the Lambda runtime nodejs${REQUIRED_MAJOR}.x), not ${process.version}: ` +
      `run it with Node ${REQUIRED_MAJOR} (.nvmrc), or run npm ci in the checkout (it installs Node ${REQUIRED_MAJOR} for the project)`,
  );
  process.exit(1);
} else if (wrongMajor) {
  // Node's own flags (--max-semi-space-size, --inspect ...) go along: they were meant for the host.
  handOver(projectNode, process.execArgv);
} else if (TOPIC_READING_COMMANDS.has(process.argv[2] ?? '') && !HOST_NODE_FLAGS.every((flag) => process.execArgv.includes(flag))) {
  handOver(process.execPath, [...process.execArgv.filter((flag) => !HOST_NODE_FLAGS.includes(flag)), ...HOST_NODE_FLAGS]);
} else {
  const built = modified(BUILD_STAMP);
  const useBuild = built !== undefined && modified(BUILT) !== undefined && !sourcesNewerThan(built);
  if (built !== undefined && !useBuild) {
    console.error('storage-consumer: dist/ is older than the sources; running the sources (npm run build refreshes it)');
  }
  if (useBuild) {
    const { runCli } = await import(BUILT.href);
    await runCli(process.argv.slice(2));
  } else {
    const { register } = await import('tsx/esm/api');
    register();
    const { runCli } = await import('../cli/main.ts');
    await runCli(process.argv.slice(2));
  }
}
