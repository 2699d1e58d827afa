import ts from 'typescript';

/**
 * A check over the SQL written in the repository's TypeScript: no query orders by a name that is
 * also a text-cast output column. In PostgreSQL a bare name in ORDER BY refers to an output
 * column first, so `SELECT id::text ... ORDER BY id` sorts ids as text ("10" before "9"): the
 * newest dead letters fell off `dlq list`, `dlq redrive` paged past letters, `audit --limit`
 * showed the wrong entries. `ORDER BY <table>.id` (a qualified name is always the input
 * column), `ORDER BY id::bigint` or another output name sorts numerically.
 */

/** One SQL text found in a source file: the literal (or `+` chain) with its substitutions resolved. */
export interface SqlText {
  readonly line: number;
  readonly sql: string;
}

/** A query that orders by a text-cast output column. */
export interface TextOrderViolation {
  readonly line: number;
  /** The ORDER BY item as written (a name, or a position such as `1`). */
  readonly orderedBy: string;
  readonly sql: string;
}

const UNRESOLVED = '?';

/**
 * Every string the file builds that reads like a query with an ORDER BY. Template substitutions
 * that name a module-level `const` holding a string (e.g. a column list) are replaced by that
 * string; any other substitution by `?`.
 */
export function sqlTextsOf(fileName: string, source: string): SqlText[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const constants = new Map<string, ts.Expression>();
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      if (ts.isIdentifier(declaration.name) && declaration.initializer) constants.set(declaration.name.text, declaration.initializer);
    }
  }
  const resolving = new Set<string>();
  const textOf = (node: ts.Expression): string | undefined => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
    if (ts.isParenthesizedExpression(node)) return textOf(node.expression);
    if (ts.isTemplateExpression(node)) {
      let text = node.head.text;
      for (const span of node.templateSpans) text += `${substitution(span.expression)}${span.literal.text}`;
      return text;
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      const left = textOf(node.left);
      const right = textOf(node.right);
      if (left === undefined && right === undefined) return undefined;
      return `${left ?? UNRESOLVED}${right ?? UNRESOLVED}`;
    }
    return undefined;
  };
  const substitution = (expression: ts.Expression): string => {
    if (!ts.isIdentifier(expression) || resolving.has(expression.text)) return UNRESOLVED;
    const initializer = constants.get(expression.text);
    if (initializer === undefined) return UNRESOLVED;
    resolving.add(expression.text);
    try {
      return textOf(initializer) ?? UNRESOLVED;
    } finally {
      resolving.delete(expression.text);
    }
  };
  const isStringish = (node: ts.Node): node is ts.Expression =>
    ts.isStringLiteral(node) ||
    ts.isNoSubstitutionTemplateLiteral(node) ||
    ts.isTemplateExpression(node) ||
    (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken && textOf(node) !== undefined);

  const found: SqlText[] = [];
  const visit = (node: ts.Node): void => {
    // The outermost piece of a `'a' + 'b'` chain is read whole; its parts are not read again.
    if (isStringish(node) && !(node.parent && isStringish(node.parent))) {
      const sql = textOf(node);
      if (sql !== undefined && /\bselect\b/i.test(sql) && /\border\s+by\b/i.test(sql)) {
        found.push({ line: file.getLineAndCharacterOfPosition(node.getStart()).line + 1, sql });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** A token, or a parenthesized group of them. */
type Node = string | Node[];

function tokenize(sql: string): string[] {
  const tokens: string[] = [];
  const pattern = /\s+|--[^\n]*|'(?:[^']|'')*'|"(?:[^"]|"")*"|::|[A-Za-z_][\w$]*|\$\d+|\d+|./gs;
  for (const match of sql.matchAll(pattern)) {
    const token = match[0];
    if (/^\s/.test(token) || token.startsWith('--')) continue;
    tokens.push(token.startsWith("'") ? "''" : token);
  }
  return tokens;
}

function group(tokens: readonly string[]): Node[] {
  const root: Node[] = [];
  const stack: Node[][] = [root];
  for (const token of tokens) {
    const current = stack.at(-1) as Node[];
    if (token === '(') {
      const child: Node[] = [];
      current.push(child);
      stack.push(child);
    } else if (token === ')') {
      if (stack.length > 1) stack.pop();
    } else current.push(token);
  }
  return root;
}

const is = (node: Node | undefined, word: string) => typeof node === 'string' && node.toLowerCase() === word;
const isName = (node: Node | undefined): node is string => typeof node === 'string' && /^[A-Za-z_][\w$]*$/.test(node);

function splitOnCommas(nodes: readonly Node[]): Node[][] {
  const items: Node[][] = [[]];
  for (const node of nodes) {
    if (node === ',') items.push([]);
    else items.at(-1)?.push(node);
  }
  return items.filter((item) => item.length > 0);
}

const TEXT_TYPES = new Set(['text', 'varchar', 'character', 'char', 'bpchar', 'name']);

/** `a.b.c` -> `c`, when the nodes are only a (qualified) name. */
function plainName(nodes: readonly Node[]): string | undefined {
  if (nodes.length === 0 || nodes.length % 2 === 0) return undefined;
  for (const [index, node] of nodes.entries()) {
    if (index % 2 === 0 ? !isName(node) : node !== '.') return undefined;
  }
  return nodes.at(-1) as string;
}

/** The output name of a select item whose value is cast to text, or `undefined`. */
function textCastName(item: readonly Node[]): string | undefined {
  let value = item;
  let alias: string | undefined;
  const asIndex = item.findLastIndex((node) => is(node, 'as'));
  if (asIndex > 0 && asIndex === item.length - 2 && isName(item.at(-1))) {
    value = item.slice(0, asIndex);
    alias = item.at(-1) as string;
  }
  // `x::text`, `x::varchar(20)`.
  const castIndex = value.findLastIndex((node) => node === '::');
  if (castIndex > 0) {
    const type = value[castIndex + 1];
    const rest = value.slice(castIndex + 2);
    const textual = typeof type === 'string' && TEXT_TYPES.has(type.toLowerCase()) && rest.every((node) => Array.isArray(node));
    if (textual) return alias ?? plainName(value.slice(0, castIndex));
    return undefined;
  }
  // `CAST(x AS text)`.
  if (value.length === 2 && is(value[0], 'cast') && Array.isArray(value[1])) {
    const inner = value[1];
    const innerAs = inner.findLastIndex((node) => is(node, 'as'));
    const type = inner[innerAs + 1];
    if (innerAs > 0 && typeof type === 'string' && TEXT_TYPES.has(type.toLowerCase())) return alias ?? plainName(inner.slice(0, innerAs));
  }
  return undefined;
}

const ORDER_BY_END = new Set(['limit', 'offset', 'fetch', 'for', 'union', 'except', 'intersect', 'returning', 'window']);

/** What one query level (a parenthesized group, or the whole text) selects, cast to text, by output name and position. */
interface Level {
  readonly textNames: Set<string>;
  readonly textPositions: Set<number>;
}

function analyzeLevel(nodes: readonly Node[], violations: string[]): Level | undefined {
  const children = new Map<Node[], Level | undefined>();
  for (const node of nodes) if (Array.isArray(node)) children.set(node, analyzeLevel(node, violations));
  let level: Level | undefined;
  for (let index = 0; index < nodes.length; index += 1) {
    const node = nodes[index];
    if (is(node, 'select')) {
      let end = index + 1;
      while (end < nodes.length && !is(nodes[end], 'from') && !(is(nodes[end], 'order') && is(nodes[end + 1], 'by'))) end += 1;
      const items = splitOnCommas(nodes.slice(index + 1, end).filter((item) => !is(item, 'distinct')));
      const textNames = new Set<string>();
      const textPositions = new Set<number>();
      for (const [position, item] of items.entries()) {
        const name = textCastName(item);
        if (name !== undefined) {
          textNames.add(name.toLowerCase());
          textPositions.add(position + 1);
        }
      }
      // `SELECT * FROM (SELECT id::text AS id ...) AS x ORDER BY id` orders by the subquery's text.
      if (items.length === 1 && items[0]?.length === 1 && items[0][0] === '*') {
        let from = end;
        while (from < nodes.length && !is(nodes[from], 'where') && !is(nodes[from], 'order')) {
          const inner = nodes[from];
          if (Array.isArray(inner)) for (const name of children.get(inner)?.textNames ?? []) textNames.add(name);
          from += 1;
        }
      }
      level = { textNames, textPositions };
    } else if (is(node, 'order') && is(nodes[index + 1], 'by') && level !== undefined) {
      let end = index + 2;
      while (end < nodes.length && !(typeof nodes[end] === 'string' && ORDER_BY_END.has((nodes[end] as string).toLowerCase()))) end += 1;
      for (const item of splitOnCommas(nodes.slice(index + 2, end))) {
        const bare = item.filter((part) => !['asc', 'desc', 'nulls', 'first', 'last'].some((word) => is(part, word)));
        const [only] = bare;
        if (bare.length !== 1 || typeof only !== 'string') continue;
        if (isName(only) && level.textNames.has(only.toLowerCase())) violations.push(only);
        else if (/^\d+$/.test(only) && level.textPositions.has(Number(only))) violations.push(only);
      }
      index = end - 1;
    }
  }
  return level;
}

/** The ORDER BY items of `sql` that name (or number) an output column cast to text. */
export function textOrderedItems(sql: string): string[] {
  const violations: string[] = [];
  analyzeLevel(group(tokenize(sql)), violations);
  return violations;
}

/** Every query in the file that orders by a text-cast output column. */
export function textOrderViolations(fileName: string, source: string): TextOrderViolation[] {
  return sqlTextsOf(fileName, source).flatMap(({ line, sql }) => textOrderedItems(sql).map((orderedBy) => ({ line, orderedBy, sql })));
}
