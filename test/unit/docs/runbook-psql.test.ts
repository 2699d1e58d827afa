/**
 * Every `psql` a document tells someone to run names its server. A bare `psql -c "..."` connects
 * to whatever the shell defaults to (the PG* variables, the local socket): on the dev stack that
 * is the machine's own PostgreSQL, which answers `(0 rows)` while the real lock is held, and a
 * later `pg_terminate_backend(<pid>)` could end a session on the wrong server. So each invocation
 * takes `"$DATABASE_URL"` (or another explicit connection argument) before its command.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Every Markdown file of the repository (tracked and new ones), none of node_modules. */
function documents(): string[] {
  const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: ROOT, encoding: 'utf8' });
  return listed.split('\n').filter((path) => path !== '' && !path.includes('node_modules/'));
}

/** One `psql` invocation found in a document: where, and the words it is given up to its command. */
interface PsqlInvocation {
  readonly line: number;
  readonly text: string;
  readonly connects: boolean;
}

/**
 * `psql` as a command: at the start of a line (after a `$ ` prompt or indentation), after a
 * backtick, `(`, `|`, `;` or `&&`, and followed by an argument (`-c`, `-f`, a quoted or `$`
 * word, a URL, `<placeholder>`). `a psql session` or `` `psql` `` alone is prose, not a command.
 */
const INVOCATION = /(?:^|[`(|;&]|^\s*\$)\s*psql\s+(?=[-"'$<]|postgres(?:ql)?:\/\/)/;

/** Arguments that say which server: the URL (quoted or not), a conninfo string, `-d`, `-h`, `--dbname`, `--host`, `service=`. */
const CONNECTION =
  /^(?:"?\$\{?DATABASE_URL\}?"?|["']?postgres(?:ql)?:\/\/\S*|["']?(?:host|service|dbname)=\S*|-d|-h|--dbname(?:=\S+)?|--host(?:=\S+)?|-d\S+|-h\S+)$/;

/** Where the options that choose the server end: the command, a file, or the end of the code span. */
const COMMAND = /^(?:-c|--command(?:=.*)?|-f|--file(?:=.*)?|-c\S.*|-f\S.*)$/;

/** The `psql` invocations of `text`, each with whether it names its server before its command. */
function psqlInvocations(text: string): PsqlInvocation[] {
  const found: PsqlInvocation[] = [];
  text.split('\n').forEach((content, index) => {
    const match = INVOCATION.exec(content);
    if (match === null) return;
    const rest = content.slice(match.index + match[0].length).split('`')[0] ?? '';
    const words: string[] = [];
    for (const word of rest.match(/"[^"]*"|'[^']*'|\S+/g) ?? []) {
      if (COMMAND.test(word)) break;
      words.push(word);
    }
    found.push({ line: index + 1, text: content.trim(), connects: words.some((word) => CONNECTION.test(word)) });
  });
  return found;
}

describe('psql lines of the documents', () => {
  it('finds a psql invocation without a connection argument, and accepts the forms with one', () => {
    // Prepare: a runbook as it was (a bare psql), and the forms that name the server.
    const planted = [
      '$ psql -c "SELECT pg_terminate_backend(<pid>)"',
      '1. The database: `psql -c "SELECT 1"`.',
      '   psql -f dev/sample-apps.sql',
      '$ psql "$DATABASE_URL" -c "SELECT pg_terminate_backend(<pid>)"',
      '3. The database: `psql "$DATABASE_URL" -c "SELECT pid, state,',
      'psql $DATABASE_URL -f dev/app-api-stand-in.sql',
      'psql -h 127.0.0.1 -U postgres -d storage -c "SELECT 1"',
      "psql 'postgres://postgres@127.0.0.1:5432/storage' -c 'SELECT 1'",
      'Walked on the dev stack: a `psql` session took the lock',
      'a psql session that forgot its BEGIN',
    ].join('\n');

    // Act
    const found = psqlInvocations(planted);

    // Assess: the three bare ones are caught, prose is not an invocation.
    expect(found.filter((invocation) => !invocation.connects).map((invocation) => invocation.line)).toEqual([1, 2, 3]);
    expect(found.map((invocation) => invocation.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('every psql line of every document names its server ("$DATABASE_URL" or an explicit connection argument)', () => {
    const bare: string[] = [];
    let seen = 0;
    for (const path of documents()) {
      for (const invocation of psqlInvocations(readFileSync(`${ROOT}${path}`, 'utf8'))) {
        seen += 1;
        if (!invocation.connects) bare.push(`${path}:${invocation.line}: ${invocation.text}`);
      }
    }
    expect(seen, 'psql invocations found in the documents (the runbooks have several)').toBeGreaterThan(5);
    expect(bare, 'psql without "$DATABASE_URL": it would connect to whatever server the shell defaults to').toEqual([]);
  });
});
