import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// One Node major everywhere: the Lambda runtime's. npm is not told through `engines` (npm checks
// that against the Node npm itself runs on, and warns EBADENGINE on every `npx` when that Node is
// older, though the project's scripts and CLI run on its own Node 24); instead `.nvmrc` says it
// to version managers and IDEs, the `node` dev dependency brings it, and the bin and npm start
// refuse another major at run time. This test keeps those places on one major.

const ROOT = new URL('../../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, ROOT), 'utf8');
const majorOf = (text: string | undefined) => Number(/(\d+)/.exec(text ?? '')?.[1]);

describe('the Node major', () => {
  it('is the Lambda runtime’s in .nvmrc, the node dev dependency, the bin, npm start, the builds and the image', () => {
    // Prepare
    const lambda = majorOf(/^ {2}runtime: nodejs(\d+)\.x$/m.exec(read('serverless.yml'))?.[1]);
    const manifest = JSON.parse(read('package.json')) as { devDependencies: Record<string, string> };
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string }> };

    // Assess
    expect(lambda).toBe(24);
    expect(read('.nvmrc').trim()).toBe(String(lambda));
    expect(majorOf(manifest.devDependencies.node)).toBe(lambda);
    expect(majorOf(lock.packages['node_modules/node']?.version)).toBe(lambda);
    expect(majorOf(/^const REQUIRED_MAJOR = (\d+);$/m.exec(read('bin/storage-consumer.js'))?.[1])).toBe(lambda);
    expect(majorOf(/^const REQUIRED_NODE_MAJOR = (\d+);$/m.exec(read('scripts/start.ts'))?.[1])).toBe(lambda);
    expect(/target: node(\d+)/.exec(read('serverless.yml'))?.[1]).toBe(String(lambda));
    expect(/target: 'node(\d+)'/.exec(read('scripts/build.js'))?.[1]).toBe(String(lambda));
    const images = [...read('Dockerfile').matchAll(/^FROM node:(\d+)-/gm)].map((match) => Number(match[1]));
    expect(images.length).toBeGreaterThan(0);
    expect(new Set(images)).toEqual(new Set([lambda]));
  });

  it('is not in `engines` or `devEngines`, which npm checks against its own Node', () => {
    // Prepare
    const manifest = JSON.parse(read('package.json')) as Record<string, unknown>;
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, Record<string, unknown>> };

    // Assess
    expect(manifest).not.toHaveProperty('engines');
    expect(manifest).not.toHaveProperty('devEngines');
    expect(lock.packages['']).not.toHaveProperty('engines');
  });

  it('npm runs scripts and npx through bash, which execs a lone command, so a signal to npm reaches it', () => {
    // Assess: dash (Debian's sh) forks and waits instead; npm forwards SIGTERM to the shell only
    expect(read('.npmrc')).toMatch(/^script-shell=bash$/m);
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    for (const name of ['start', 'host']) expect(scripts[name]).toMatch(/^exec node /);
  });
});
