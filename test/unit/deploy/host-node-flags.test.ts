import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HOST_NODE_FLAGS } from '../../../bench/support.js';

// The host's memory bound rests on two V8 flags given on its command line (docs/design.md,
// "Memory"); each way the project starts the host must give both, and the benches measure it so.

const ROOT = new URL('../../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, ROOT), 'utf8');

describe("the host's Node flags", () => {
  it("are the same in the image, npm run host, npm start, the benches and the bin's reconcile", () => {
    // Prepare
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(read('Dockerfile'))?.[1];
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    // `--import tsx` loads the TypeScript of npm start; it is no flag of the host's memory.
    const flagsOf = (words: readonly string[]) => words.filter((word) => word.startsWith('--') && word !== '--import');

    // Assess
    expect(HOST_NODE_FLAGS).toEqual(['--max-semi-space-size=4', '--heap-growing-percent=150']);
    expect(JSON.parse(entrypoint ?? 'null')).toEqual(['node', ...HOST_NODE_FLAGS, 'dist/host/main.js']);
    expect(scripts.host).toBe(`exec node ${HOST_NODE_FLAGS.join(' ')} bin/storage-consumer.js run`);
    expect(flagsOf((scripts.start ?? '').split(' '))).toEqual(HOST_NODE_FLAGS);
    for (const bench of ['bench/e2e.ts', 'bench/peer/peers.ts']) expect(read(bench)).toContain('...HOST_NODE_FLAGS');
    // `reconcile` reads a whole topic: bin/storage-consumer.js runs it with the same flags.
    expect(read('bin/storage-consumer.js')).toContain(
      `const HOST_NODE_FLAGS = [${HOST_NODE_FLAGS.map((flag) => `'${flag}'`).join(', ')}];`,
    );
  });

  // Spawns a Node process.
  it('are flags the project’s Node accepts', { timeout: 30_000 }, async () => {
    // Act: a bad V8 flag makes node exit 9 ("bad option") before it runs anything
    const { spawnSync } = await import('node:child_process');
    const run = spawnSync(process.execPath, [...HOST_NODE_FLAGS, '-e', 'process.stdout.write("ran")'], { encoding: 'utf8' });

    // Assess
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('ran');
    expect(run.status).toBe(0);
  });
});
