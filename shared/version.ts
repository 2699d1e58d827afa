/**
 * The service's version, as `storage-consumer --version` and the host's state lines give it: read
 * once, when the module loads, from the service's package.json wherever this module runs from.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'storage-consumer';

/**
 * The service's version, from its package.json: found by walking up from this module, which
 * sits at another depth in the sources (shared/) than in a build (dist/cli/, dist/host/) or a
 * Lambda bundle. `unknown` when no package.json of this service is found.
 */
function readVersion(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth += 1) {
    try {
      const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === PACKAGE_NAME && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // No package.json here (or not ours): look one folder up.
    }
    const parent = dirname(folder);
    if (parent === folder) break;
    folder = parent;
  }
  return 'unknown';
}

/** `storage-consumer --version`, and the `version` of the host's state lines. */
export const SERVICE_VERSION: string = readVersion();
