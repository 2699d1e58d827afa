/**
 * The migration runner's apply step: one file and its tracking row in one transaction, so both
 * commit or neither does. run.ts calls it for each pending file while it holds the migration lock.
 */
import pg from 'pg';
import { MigrationError } from '../errors.js';
import { recordAppliedMigration } from './tracking.js';
import type { MigrationFile } from './model.js';

/**
 * Applies one migration and records it, in one transaction: both commit, or neither does. The
 * file must not contain its own BEGIN/COMMIT, nor statements that cannot run in a transaction
 * (CREATE INDEX CONCURRENTLY).
 * @throws MigrationError naming the file, with the database's error as `cause`, after ROLLBACK.
 */
export async function applyMigration(client: pg.ClientBase, file: MigrationFile): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(file.sql);
    await recordAppliedMigration(client, file);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new MigrationError(`migration ${file.fileName} failed: ${describeFailure(error, file.sql)}`, {
      cause: error,
    });
  }
}

function describeFailure(error: unknown, sql: string): string {
  if (!(error instanceof pg.DatabaseError)) {
    return String(error instanceof Error ? error.message : error);
  }
  const parts = [error.message, `SQLSTATE ${error.code ?? 'unknown'}`];
  const position = Number(error.position);
  if (Number.isInteger(position) && position > 0) {
    parts.push(`line ${sql.slice(0, position - 1).split('\n').length}`);
  }
  return `${parts[0]} (${parts.slice(1).join(', ')})`;
}
