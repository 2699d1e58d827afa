/**
 * cfn-lint, AWS's CloudFormation linter (a Python tool, not an npm package), run on the packaged
 * templates beside the offline check against the resource specification
 * (test/helpers/cloudformation-spec.ts). It knows what that check does not: value patterns (an
 * ARN that is ""), list lengths, and AWS's own rules on combinations of properties.
 */
import { spawnSync } from 'node:child_process';

/** One finding, as `cfn-lint --format json` reports it. */
export interface CfnLintFinding {
  readonly Filename: string;
  readonly Level: string;
  readonly Message: string;
  readonly Rule: { readonly Id: string };
  readonly Location: { readonly Path: ReadonlyArray<string | number>; readonly Start: { readonly LineNumber: number } };
}

/** The version line (`cfn-lint 1.51.0`), or undefined when cfn-lint cannot be run here. */
export function cfnLintVersion(): string | undefined {
  const result = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
  const line = `${result.stdout ?? ''}`.trim();
  return result.status === 0 && /^cfn-lint \d/.test(line) ? line : undefined;
}

/** The line printed when the cfn-lint tests are skipped (outside CI only). */
export const CFN_LINT_MISSING =
  'cfn-lint not found (PATH): the cfn-lint checks of the packaged templates are skipped; install it with "pip install cfn-lint" to run them';

/**
 * Runs cfn-lint once on `templates`, for each of `regions` (cfn-lint's own default is us-east-1
 * alone); every finding of every file (exit 0: none).
 */
export function cfnLint(
  templates: readonly string[],
  regions: readonly string[],
): { status: number | null; findings: CfnLintFinding[]; stderr: string } {
  const result = spawnSync('cfn-lint', ['--format', 'json', '--regions', ...regions, '--', ...templates], {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (result.error) throw new Error(`cfn-lint could not be run: ${result.error.message}`);
  const stdout = `${result.stdout ?? ''}`.trim();
  let findings: CfnLintFinding[];
  try {
    findings = stdout === '' ? [] : (JSON.parse(stdout) as CfnLintFinding[]);
  } catch {
    throw new Error(`cfn-lint exited ${String(result.status)} without JSON findings:\n${stdout}\n${result.stderr}`);
  }
  return { status: result.status, findings, stderr: `${result.stderr ?? ''}` };
}

/** A finding as one line: `E3032 Resources/X/Properties/Y (line 404): expected minimum item count: 1, found: 0`. */
export function describeFinding(finding: CfnLintFinding): string {
  return `${finding.Rule.Id} ${finding.Location.Path.join('/')} (line ${finding.Location.Start.LineNumber}): ${finding.Message}`;
}
