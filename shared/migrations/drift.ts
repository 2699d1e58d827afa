/**
 * Schema drift: what the applied migrations define (tables, columns with their types, unique keys)
 * compared with what the live schema has; `storage-consumer migrate` and `verify` report it. The
 * definition is not a second copy of the schema: the applied files themselves run in a scratch
 * schema inside a transaction that is rolled back, against a stand-in of the App API's table (so no
 * lock is taken on the real one).
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { MigrationFile } from './model.js';

/** One difference, in words: `table network_metrics is missing though migration 0003 is recorded`. */
export type SchemaDrift = string;

interface Shape {
  /** table -> column -> type */
  readonly columns: Map<string, Map<string, string>>;
  /** `table (a, b)` of every primary and unique key */
  readonly uniqueKeys: Set<string>;
}

async function shapeOf(client: pg.ClientBase, schema: string): Promise<Shape> {
  const columns = await client.query<{ table_name: string; column_name: string; type: string }>(
    `SELECT c.table_name, c.column_name, format_type(a.atttypid, a.atttypmod) AS type
       FROM information_schema.columns c
       JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass AND a.attname = c.column_name
      WHERE c.table_schema = $1`,
    [schema],
  );
  const keys = await client.query<{ key: string }>(
    `SELECT format('%s (%s)', t.relname, string_agg(a.attname, ', ' ORDER BY k.ordinality)) AS key
       FROM pg_constraint c
       JOIN pg_class t ON t.oid = c.conrelid
       JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ordinality) ON TRUE
       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
      WHERE c.contype IN ('p', 'u') AND c.connamespace = $1::regnamespace
      GROUP BY c.oid, t.relname`,
    [schema],
  );
  const shape: Shape = { columns: new Map(), uniqueKeys: new Set(keys.rows.map((row) => row.key)) };
  for (const row of columns.rows) {
    let table = shape.columns.get(row.table_name);
    if (!table) shape.columns.set(row.table_name, (table = new Map()));
    table.set(row.column_name, row.type);
  }
  return shape;
}

const label = (file: MigrationFile) => String(file.version).padStart(4, '0');

/**
 * Compares the live schema (the connection's `current_schema()`) with what `applied` define.
 * Returns the differences in words (empty: none); extra tables or columns are not drift.
 * Needs the right to create a schema; runs in one transaction that is always rolled back.
 */
export async function findSchemaDrift(client: pg.ClientBase, applied: readonly MigrationFile[]): Promise<SchemaDrift[]> {
  const live = (await client.query<{ schema: string }>('SELECT current_schema() AS schema')).rows[0]?.schema;
  if (!live) return ['the connection has no current schema'];
  const scratch = `storage_consumer_drift_${randomBytes(6).toString('hex')}`;
  const definedBy = new Map<string, MigrationFile>();
  let expected: Shape;
  await client.query('BEGIN');
  try {
    await client.query(`CREATE SCHEMA ${scratch}`);
    await client.query(`SET LOCAL search_path = ${scratch}`);
    await client.query(
      'CREATE TABLE apps_registry_application (id BIGINT PRIMARY KEY, package_name VARCHAR(255) UNIQUE NOT NULL, is_active BOOLEAN NOT ' +
        'NULL)',
    );
    const standIn = await shapeOf(client, scratch);
    const seen = new Set([
      ...standIn.uniqueKeys,
      ...[...standIn.columns].flatMap(([table, columns]) => [table, ...[...columns.keys()].map((c) => `${table}.${c}`)]),
    ]);
    for (const file of applied) {
      await client.query(file.sql);
      const after = await shapeOf(client, scratch);
      const items = [
        ...after.uniqueKeys,
        ...[...after.columns].flatMap(([table, columns]) => [table, ...[...columns.keys()].map((c) => `${table}.${c}`)]),
      ];
      for (const item of items) {
        if (!seen.has(item)) {
          seen.add(item);
          definedBy.set(item, file);
        }
      }
    }
    expected = await shapeOf(client, scratch);
  } finally {
    await client.query('ROLLBACK');
  }
  const actual = await shapeOf(client, live);
  const drift: SchemaDrift[] = [];
  const by = (item: string) => {
    const file = definedBy.get(item);
    return file ? ` though migration ${label(file)} is recorded` : '';
  };
  for (const [table, columns] of expected.columns) {
    if (!definedBy.has(table)) continue; // the App API's stand-in
    const liveColumns = actual.columns.get(table);
    if (!liveColumns) {
      drift.push(`table ${table} is missing${by(table)}`);
      continue;
    }
    for (const [column, type] of columns) {
      const liveType = liveColumns.get(column);
      if (liveType === undefined) drift.push(`column ${table}.${column} is missing${by(`${table}.${column}`)}`);
      else if (liveType !== type)
        drift.push(
          `column ${table}.${column} is ${liveType}, but migration ` +
            `${label(definedBy.get(`${table}.${column}`) ?? (applied[0] as MigrationFile))} defines ${type}`,
        );
    }
  }
  for (const key of expected.uniqueKeys) {
    if (!definedBy.has(key)) continue;
    const table = key.slice(0, key.indexOf(' '));
    if (actual.columns.has(table) && !actual.uniqueKeys.has(key)) drift.push(`unique key ${key} is missing${by(key)}`);
  }
  return drift;
}
