import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The Dockerfile's build stage copies folder by folder; a folder the host or the CLI imports and
// the Dockerfile does not copy fails the image build, and no Docker engine here would show it.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every top-level folder whose code the entry points reach through relative imports. */
function reachedFolders(entries: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const folders = new Set<string>();
  const pending = [...entries];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    folders.add(path.relative(ROOT, file).split(path.sep)[0] as string);
    const source = readFileSync(file, 'utf8');
    for (const [, target] of source.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const resolved = path.resolve(path.dirname(file), (target as string).replace(/\.js$/, '.ts'));
      if (resolved.endsWith('.ts')) pending.push(resolved);
    }
  }
  return folders;
}

describe('the Dockerfile', () => {
  it("copies every folder the host's and the CLI's code reaches into the build stage", () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const buildStage = dockerfile.split(/^FROM /m)[1] ?? '';
    const copied = new Set([...buildStage.matchAll(/^COPY (\S+) \1$/gm)].map(([, folder]) => folder));
    const reached = reachedFolders(['cli/main.ts', 'host/main.ts'].map((entry) => path.join(ROOT, entry)));

    expect(reached.has('kafka')).toBe(true);
    expect([...reached].filter((folder) => !copied.has(folder)).sort()).toEqual([]);
  });
});
