/**
 * `--no-audit`, for the commands that change state: the option, the audit policy it asks for, the
 * refusal a command gives without it when its entry cannot be written, and the warning with it
 * (docs/operations.md, "The audit trail").
 */
import type { AuditPolicy } from '../../shared/operator-actions.js';
import { AuditUnavailableError } from '../../shared/operator-actions.js';
import type { CliIo } from '../command.js';
import { RefusedError } from '../command.js';

/**
 * `--no-audit`: the operator accepts a change the audit trail may not record. Without it every
 * state-changing command refuses when its audit entry cannot be written (docs/operations.md,
 * "The audit trail"); with it the command goes on and says, on stderr, that nothing recorded it.
 */
export const NO_AUDIT_OPTION = {
  'no-audit': {
    type: 'boolean',
    help:
      'go on even when the audit entry cannot be written: the change is then NOT recorded in the audit trail ' +
      '(the command says so on stderr)',
  },
} as const;

/** The policy `--no-audit` asks for. */
export function auditPolicy(values: { readonly 'no-audit'?: boolean }): AuditPolicy {
  return values['no-audit'] === true ? 'waived' : 'required';
}

/**
 * The refusal of a command whose audit entry could not be written; any other error unchanged.
 * `done` says what the command did before it stopped (e.g. earlier re-drive batches), if anything.
 */
export function auditRefusal(error: unknown, command: string, done = 'nothing was changed'): unknown {
  if (!(error instanceof AuditUnavailableError)) return error;
  return new RefusedError(
    `${command} refused: ${error.message}; ${done}. Every change is recorded before it is made; give --no-audit to ${command} ` +
      `without a record`,
  );
}

/** Tells the operator that a change was made without an audit entry (only ever under `--no-audit`). */
export function reportUnrecorded(io: CliIo, command: string, reason: string): void {
  io.stderr(`storage-consumer ${command}: NOT RECORDED: no audit entry was written for this change (--no-audit): ${reason}\n`);
}
