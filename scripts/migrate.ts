/**
 * `npm run migrate`: applies the SQL migrations to the database named by `DATABASE_URL` (or the
 * standard PG* variables when it is unset), prints the report, exits 1 on failure.
 */
import { runMigrations } from '../shared/migrations/index.js';

const url = process.env.DATABASE_URL;
try {
  const report = await runMigrations({ connection: url ? { connectionString: url } : {} });
  console.log(JSON.stringify(report));
} catch (error) {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  const message = error instanceof Error ? error.message : String(error);
  console.error(`migration failed: ${message}${cause && !message.includes(cause) ? ` (${cause})` : ''}`);
  process.exitCode = 1;
}
