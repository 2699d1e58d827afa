import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { main } from '../../cli/main.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What one command line printed and how it exited. */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `storage-consumer <argv>` in this process with exactly `env`, capturing its output;
 * `interactive` plays a terminal on stderr.
 */
export async function runCli(
  argv: readonly string[],
  env: Record<string, string>,
  options: { interactive?: boolean } = {},
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env,
    interactive: options.interactive === true,
  });
  return { code, stdout, stderr };
}

/** Runs `storage-consumer <argv>` through the package's bin, as an operator would, in a child process. */
export function runBin(argv: readonly string[], env: Record<string, string>): Promise<CliRun> {
  return runChild(process.execPath, ['bin/storage-consumer.js', ...argv], env);
}

/** Runs `npm run --silent <script> -- <argv>` in the repository, in a child process. */
export function runNpm(script: string, argv: readonly string[], env: Record<string, string>): Promise<CliRun> {
  return runChild('npm', ['run', '--silent', script, ...(argv.length > 0 ? ['--', ...argv] : [])], env);
}

function runChild(command: string, args: readonly string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** The rows of a table the CLI printed (header line first), split on runs of 2+ spaces. */
export function tableRows(text: string): string[][] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => line.trim().split(/\s{2,}/));
}
