/** Reading PromQL in tests: the dashboard's panels and the alert rules may name only metrics the host exports. */
const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'and',
  'or',
  'unless',
  'le',
  'inf',
  'nan',
]);

/** The metric names a PromQL expression selects: identifiers that are neither functions, keywords, labels nor variables. */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings (label values)
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\b(?:by|without|on|ignoring)\s*\([^)]*\)/g, '') // grouping labels
    .replace(/\[[^\]]*\]/g, '') // range selectors
    .replace(/\$\w+/g, ''); // dashboard variables
  return [...stripped.matchAll(/[a-zA-Z_:][\w:]*(?![\w:])(?!\s*\()/g)]
    .map(([name]) => name)
    .filter((name) => !PROMQL_WORDS.has(name.toLowerCase()) && !/^\d/.test(name));
}
