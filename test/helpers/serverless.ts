/**
 * Runs the pinned osls (`sls`) as a child process, the way a developer or CI does, offline.
 * Each run gets its own serverless-esbuild work folder so test files can run side by side.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (the service directory). */
export const SERVICE_DIRECTORY = fileURLToPath(new URL('../../', import.meta.url));
const SLS = fileURLToPath(new URL('../../node_modules/serverless/bin/serverless.js', import.meta.url));

/** What one `sls` run printed and how it ended. */
export interface SlsResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment of an `sls` child: the test's, without anything that could reach AWS. Its
 * temporary folder lies inside the run's work folder: serverless-esbuild's zip step leaves one
 * folder per function in the system's temporary folder, and removing the work folder takes them
 * along.
 */
export function slsEnvironment(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const workFolder = `.esbuild/test-${randomBytes(4).toString('hex')}`;
  return {
    ...process.env,
    // No credentials and no profile: packaging and local invocation must not need AWS.
    AWS_PROFILE: undefined,
    AWS_ACCESS_KEY_ID: undefined,
    AWS_SECRET_ACCESS_KEY: undefined,
    SLS_TELEMETRY_DISABLED: '1',
    SLS_NOTIFICATIONS_MODE: 'off',
    STORAGE_ESBUILD_WORK_FOLDER: workFolder,
    TMPDIR: join(SERVICE_DIRECTORY, workFolder, 'tmp'),
    ...extra,
  };
}

/** Starts `sls <args>` in the repository; the caller owns the child. */
export function spawnSls(args: readonly string[], env: NodeJS.ProcessEnv = slsEnvironment()): ChildProcess {
  if (env.TMPDIR?.startsWith(SERVICE_DIRECTORY)) mkdirSync(env.TMPDIR, { recursive: true });
  return spawn(process.execPath, [SLS, ...args], { cwd: SERVICE_DIRECTORY, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Removes a run's serverless-esbuild work folder (`sls package` removes its own; `invoke local` does not). */
export async function removeWorkFolder(env: NodeJS.ProcessEnv): Promise<void> {
  const folder = env.STORAGE_ESBUILD_WORK_FOLDER;
  if (folder?.startsWith('.esbuild/test-')) await rm(join(SERVICE_DIRECTORY, folder), { recursive: true, force: true });
}

/** Runs `sls <args>` to completion (killed after `timeoutMs`), then removes its work folder. */
export async function runSls(args: readonly string[], env: NodeJS.ProcessEnv = slsEnvironment(), timeoutMs = 300_000): Promise<SlsResult> {
  const child = spawnSls(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  }).finally(() => clearTimeout(timer));
  await removeWorkFolder(env);
  return { code, stdout, stderr };
}

/** Throws with the output when a run failed, so the test report shows why. */
export function assertSucceeded(result: SlsResult, what: string): SlsResult {
  if (result.code !== 0) {
    throw new Error(
      `${what} exited ${String(result.code)}\n--- stdout\n${result.stdout.slice(-4000)}\n--- stderr\n${result.stderr.slice(-4000)}`,
    );
  }
  return result;
}
