import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sqlTextsOf, textOrderedItems, textOrderViolations } from '../../helpers/sql-order.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every TypeScript file git knows in the repository (tracked or new, not ignored). */
function repositoryFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  // This file writes the forbidden forms on purpose.
  const self = 'test/unit/helpers/sql-order.test.ts';
  return listed.split('\n').filter((path) => path !== '' && path !== self && !path.endsWith('.d.ts'));
}

// The forms that sorted ids as text before issue 26, as they were written.
const OLD_DEAD_LETTER_STORE = `
const SUMMARY_COLUMNS = \`id::text, pipeline, topic, partition, kafka_offset::text, reason, detail, payload_size,
  octet_length(payload) AS stored_size, created_at, redriven_at\`;
export async function listDeadLetters(db, condition, limit) {
  return db.query(\`SELECT \${SUMMARY_COLUMNS} FROM dead_letter_events WHERE \${condition} ORDER BY id DESC LIMIT \${limit}\`);
}
export async function nextPendingDeadLetters(db, condition, limit) {
  return db.query(
    \`SELECT \${SUMMARY_COLUMNS} FROM dead_letter_events
      WHERE id > $1 AND \${condition}
      ORDER BY id LIMIT \${limit}\`,
  );
}`;
const OLD_AUDIT_LIST = `
const list = (client) => client.query(
  \`SELECT * FROM (
     SELECT id::text AS id, time, actor, command, arguments, outcome FROM operator_actions
      WHERE $1::timestamptz IS NULL OR time >= $1 ORDER BY id DESC LIMIT $2
   ) AS newest ORDER BY id::bigint\`,
);`;

/** Parsing every TypeScript file of the repository takes seconds, many more on a loaded machine. */
const WHOLE_TREE_TIMEOUT_MS = 60_000;

describe('no query orders by a text-cast output column', () => {
  it('finds none in the repository, and reads its queries (the check has something to check)', { timeout: WHOLE_TREE_TIMEOUT_MS }, () => {
    const violations: string[] = [];
    const queriesByFile = new Map<string, number>();
    for (const path of repositoryFiles()) {
      const source = readFileSync(`${REPO_ROOT}${path}`, 'utf8');
      queriesByFile.set(path, sqlTextsOf(path, source).length);
      for (const violation of textOrderViolations(path, source)) {
        violations.push(`${path}:${violation.line}: ORDER BY ${violation.orderedBy} is a text-cast output column`);
      }
    }
    expect(violations).toEqual([]);
    // The listings issue 26 is about are among the queries read.
    expect(queriesByFile.get('cli/dead-letter-store.ts')).toBeGreaterThanOrEqual(4);
    expect(queriesByFile.get('shared/operator-actions.ts')).toBeGreaterThanOrEqual(1);
  });

  it('fails on the forms that sorted ids as text: a column list in a constant, and a "newest N" subquery', () => {
    const store = textOrderViolations('old-dead-letter-store.ts', OLD_DEAD_LETTER_STORE);
    expect(store.map((violation) => violation.orderedBy)).toEqual(['id', 'id']);
    expect(store.map((violation) => violation.line)).toEqual([5, 9]);
    expect(textOrderViolations('old-operator-actions.ts', OLD_AUDIT_LIST).map((violation) => violation.orderedBy)).toEqual(['id']);
  });

  it('flags a bare name, a position and a CAST, also through SELECT * over a subquery and after a + chain', () => {
    expect(textOrderedItems('SELECT id::text AS id, name FROM t ORDER BY id')).toEqual(['id']);
    expect(textOrderedItems('SELECT id::text FROM t ORDER BY name, ID DESC NULLS LAST')).toEqual(['ID']);
    expect(textOrderedItems('SELECT t.id::text FROM t ORDER BY 1')).toEqual(['1']);
    expect(textOrderedItems('SELECT CAST(id AS text) FROM t ORDER BY id')).toEqual(['id']);
    expect(textOrderedItems('SELECT offset_value::varchar(20) AS position FROM t ORDER BY position')).toEqual(['position']);
    expect(textOrderedItems('SELECT * FROM (SELECT id::text AS id FROM t) AS x ORDER BY id')).toEqual(['id']);
    const chained = "const q = 'SELECT id::text AS id FROM operator_actions ' + 'ORDER BY id';";
    expect(textOrderViolations('chain.ts', chained).map((violation) => violation.orderedBy)).toEqual(['id']);
  });

  it('passes the numeric forms: a qualified name, a cast back, another name, an aggregate or window ORDER BY', () => {
    expect(textOrderedItems('SELECT id::text, pipeline FROM dead_letter_events ORDER BY dead_letter_events.id DESC')).toEqual([]);
    expect(textOrderedItems('SELECT * FROM (SELECT id::text AS id FROM t ORDER BY t.id DESC LIMIT 3) AS n ORDER BY id::bigint')).toEqual(
      [],
    );
    expect(textOrderedItems('SELECT id::text AS id_text FROM t ORDER BY id')).toEqual([]);
    expect(textOrderedItems("SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM t")).toEqual([]);
    expect(textOrderedItems('SELECT id::text AS id, row_number() OVER (ORDER BY id) AS n FROM t ORDER BY t.id')).toEqual([]);
    expect(textOrderedItems('SELECT count(*)::text AS count FROM t GROUP BY pipeline ORDER BY pipeline')).toEqual([]);
  });
});
