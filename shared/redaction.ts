/**
 * The one redaction of error text shown outside the process: every HTTP answer of the host
 * (`/healthz`, `/readyz`, `/pipelines/...`), `/readyz`'s causes and the CLI's error lines. The
 * endpoint answers anyone who can reach its port, and an error's message or stack may name
 * broker and database addresses, host names, users and passwords.
 */

/** Any URL but a `file:` one (stack frames of ES modules are `file:///...:line:column`). */
const URL_WITH_SCHEME = /\b(?!file:)[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi;
const IPV6_IN_BRACKETS = /\[[0-9a-f:.]+\](?::\d+)?/gi;
const IPV4 = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g;
/** `::1`, `::1:5432` (Node's form of an IPv6 peer), `fe80::1`, `2001:db8::5`: a `::` makes it unambiguous. */
const IPV6_COMPRESSED = /(?<![\w:.])(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4})*)?::(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4})*)?(?![\w:])/gi;
const IPV6_FULL = /(?<![\w:.])(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}(?![\w:])/gi;
/**
 * `kafka-1.internal:9092`, `localhost:5432` at the start or after a space, bracket, quote, `=` or
 * `,` (kafkajs' `broker` field is the whole value); never a stack frame's `file.js:12:34` (a path
 * before it, a column after it).
 */
const NAME_WITH_PORT = /(?<=^|[\s(=,'"[])(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{1,5}\b(?!:\d)/gi;
/** Host names a resolver failed on, and the names of a certificate check. */
const RESOLVER = /\b(ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME)\s+[^\s,;)]+/g;
const CERTIFICATE_NAMES = /\b(Host|DNS|IP Address|IP): ?[^\s,;]+/g;
/** libpq-style `password=... user=... host=...`. */
const CONNINFO = /\b(password|passwd|pwd|user|username|host|hostaddr)=("[^"]*"|'[^']*'|[^\s,;&]+)/gi;
/** PostgreSQL names the user as `for user "x"`, `user "x"` (pg_hba), `role "x"`. */
const DATABASE_USER = /\b(user|role) "[^"]*"/g;

/**
 * The text with addresses (IPv4, IPv6, host:port), URLs (their users and passwords with them),
 * host names a resolver or certificate check named, `key=value` credentials and database user
 * names replaced by `<address>`, `<url>`, `<host>`, `<redacted>` and `<user>`.
 */
export function redactConnectionDetails(text: string): string {
  return text
    .replace(URL_WITH_SCHEME, '<url>')
    .replace(IPV6_IN_BRACKETS, '<address>')
    .replace(IPV4, '<address>')
    .replace(IPV6_FULL, '<address>')
    .replace(IPV6_COMPRESSED, '<address>')
    .replace(NAME_WITH_PORT, '<address>')
    .replace(RESOLVER, '$1 <host>')
    .replace(CERTIFICATE_NAMES, '$1: <host>')
    .replace(CONNINFO, '$1=<redacted>')
    .replace(DATABASE_USER, '$1 <user>');
}

/**
 * A JSON answer with {@link redactConnectionDetails} applied to every string in it (keys
 * included), so that no field can carry an address, whoever built it. Values with `toJSON`
 * (dates) are taken as JSON would take them.
 */
export function redactAnswer(value: unknown): unknown {
  if (typeof value === 'string') return redactConnectionDetails(value);
  if (value === null || typeof value !== 'object') return value;
  const json = (value as { toJSON?: unknown }).toJSON;
  if (typeof json === 'function') return redactAnswer((json as () => unknown).call(value));
  if (Array.isArray(value)) return value.map(redactAnswer);
  return Object.fromEntries(Object.entries(value).map(([key, entry]) => [redactConnectionDetails(key), redactAnswer(entry)]));
}

/** An error's code (`ECONNREFUSED`, `57P03`) or else its name: never its message, which may carry addresses. */
export function errorCode(error: unknown): string {
  const shape = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; name?: unknown };
  if (typeof shape.code === 'string' && /^[A-Z0-9_]+$/i.test(shape.code)) return shape.code;
  return typeof shape.name === 'string' ? shape.name : 'unknown error';
}

/** The fields of a log line that carry error text (an error's own `message` and `stack` included). */
const ERROR_TEXT_FIELDS: ReadonlySet<string> = new Set(['error', 'lastError', 'cause', 'causes', 'reason', 'message', 'stack', 'missing']);

/**
 * A JSON replacer for operators' log lines (Powertools' `jsonReplacerFn`): the error text in
 * them passes through {@link redactConnectionDetails}, as in every HTTP answer, so a log line
 * never carries a broker's or a database's address, user or password. Other fields (a topic,
 * a group, a broker id) stay as they are.
 */
export function redactErrorText(key: string, value: unknown): unknown {
  if (!ERROR_TEXT_FIELDS.has(key)) return value;
  if (typeof value === 'string') return redactConnectionDetails(value);
  if (Array.isArray(value)) return value.map((entry) => (typeof entry === 'string' ? redactConnectionDetails(entry) : entry));
  return value;
}
