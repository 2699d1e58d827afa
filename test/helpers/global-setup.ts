import pg from 'pg';
import { SERVER_URL } from './database.js';

/**
 * Integration tests need a real PostgreSQL. When it is unreachable they FAIL here, loudly
 * (in CI and locally alike): a skipped integration test would report a green run that proved
 * nothing.
 */
export default async function setup(): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `Integration tests need PostgreSQL at ${SERVER_URL} (set DATABASE_URL). It is unreachable: ${String(error)}`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}
