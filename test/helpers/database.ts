import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';

/**
 * The server integration tests run against: `DATABASE_URL`, which the global setup sets to its
 * embedded PostgreSQL when the run was started without one.
 */
export const SERVER_URL = requiredDatabaseUrl();

function requiredDatabaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is unset: integration tests get it from test/helpers/global-setup.ts');
  return url;
}

/** A throw-away schema in the test database; every connection made through `url` lives in it. */
export interface TestSchema {
  readonly schema: string;
  /** `SERVER_URL` with `options=-c search_path=<schema>`: hand it to anything that connects. */
  readonly url: string;
  /** A pool on the schema, for the test's own assertions. */
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

/** Adds libpq `options` to a URL (kept when it already has some). */
export function withSearchPath(url: string, schema: string): string {
  const parsed = new URL(url);
  const existing = parsed.searchParams.get('options');
  parsed.searchParams.set('options', `${existing ? `${existing} ` : ''}-c search_path=${schema}`);
  return parsed.toString();
}

/**
 * Creates a fresh schema so test files can run side by side on one database.
 * Fails (never skips) when PostgreSQL is unreachable.
 */
export async function createTestSchema(prefix = 't'): Promise<TestSchema> {
  const schema = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`PostgreSQL is unreachable at ${SERVER_URL}; integration tests need it`, { cause: error });
  }
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  const url = withSearchPath(SERVER_URL, schema);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  return {
    schema,
    url,
    pool,
    async drop() {
      await pool.end();
      const client = new pg.Client({ connectionString: SERVER_URL });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Creates the App API stand-in table (dev/test only) and registers the given apps. */
export async function createAppsStandIn(
  pool: pg.Pool,
  apps: ReadonlyArray<{ id: number; package_name: string; is_active?: boolean }> = [],
): Promise<void> {
  const sql = await readFile(new URL('../../dev/app-api-stand-in.sql', import.meta.url), 'utf8');
  await pool.query(sql);
  for (const app of apps) {
    await pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
      app.id,
      app.package_name,
      app.is_active ?? true,
    ]);
  }
}

/** A schema with the App API stand-in, the given apps, and every migration applied. */
export async function createMigratedSchema(
  apps: ReadonlyArray<{ id: number; package_name: string; is_active?: boolean }> = [],
  prefix = 't',
): Promise<TestSchema> {
  const { runMigrations } = await import('../../shared/migrations/run.js');
  const schema = await createTestSchema(prefix);
  await createAppsStandIn(schema.pool, apps);
  await runMigrations({ connection: { connectionString: schema.url }, logger: { info: () => undefined, warn: () => undefined } });
  return schema;
}

/** A throw-away database of its own: advisory locks are per database, so lock tests use one. */
export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  /** A pool on the database, for the test's own assertions. */
  readonly pool: pg.Pool;
  /** A schema in this database, and the URL whose connections live in it. */
  schema(name: string): Promise<string>;
  drop(): Promise<void>;
}

/** Creates a fresh database on the test server (the test role may create databases in CI). */
export async function createTestDatabase(prefix = 'db'): Promise<TestDatabase> {
  const name = `sc_${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const parsed = new URL(SERVER_URL);
  parsed.pathname = `/${name}`;
  const url = parsed.toString();
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  return {
    name,
    url,
    pool,
    async schema(schema) {
      await pool.query(`CREATE SCHEMA ${schema}`);
      return withSearchPath(url, schema);
    },
    async drop() {
      await pool.end();
      const client = new pg.Client({ connectionString: SERVER_URL });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
