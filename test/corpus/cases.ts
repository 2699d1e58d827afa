/**
 * The hostile-message corpus: malformed and tricky record values, each with the outcome a user
 * must see. Pure data (no database, no handler): `test/integration/corpus.test.ts` sends them
 * through the handler in batches mixed with good messages and checks every outcome.
 *
 * Expected rows are written as the exact text `chaos/stored-rows.ts` reads back, derived by hand
 * from docs/design.md, never by running the decoder.
 */
import type { PipelineName } from '../../shared/pipelines.js';
import type { RejectionReason } from '../../shared/types.js';
import { doubleText } from '../../chaos/stored-rows.js';
import type { RowText } from '../../chaos/stored-rows.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

/** What must become of one corpus record. */
export type CorpusOutcome =
  /** A dead letter at the record's coordinates; `field` is what the detail must start with. */
  | { readonly kind: 'dead_letter'; readonly reason: RejectionReason; readonly field?: string; readonly truncated?: boolean }
  /** A row whose lineage is this record, reading back exactly as `row` (the full row). */
  | { readonly kind: 'stored'; readonly row: RowText }
  /** Neither a row of its own nor a dead letter: another version of the same key won. */
  | { readonly kind: 'superseded' };

/** One corpus record. */
export interface CorpusCase {
  readonly name: string;
  readonly topic: PipelineName;
  /** 0 unless the case is about partitions. */
  readonly partition: number;
  readonly value: Buffer | null;
  /**
   * Cases of one `group` go into the same batch, in this order (e.g. duplicates within a batch);
   * a group with `later` goes into a batch after every other batch of its topic.
   */
  readonly group?: string;
  readonly later?: boolean;
  readonly expect: CorpusOutcome;
}

/** Applications the corpus database registers. */
export const CORPUS_APPS = [
  { id: 101, package_name: 'com.example.weather' },
  // Package names are 1..255 characters (code points) without whitespace: the longest, in emoji.
  { id: 102, package_name: '\u{1F326}'.repeat(255) },
  { id: 103, package_name: 'com.example.retired', is_active: false },
] as const;

/** A package name no app has: its valid messages wait in the dead-letter table. */
const UNKNOWN_PACKAGE = 'com.example.not-registered';

// ---- building blocks ------------------------------------------------------------------------

/** A raw JSON token put in place of a field, for numbers JSON.stringify cannot write. */
class RawJson {
  constructor(readonly text: string) {}
}
const raw = (text: string) => new RawJson(text);
/** Removes a field from the message. */
const OMIT = Symbol('omit');

type Overrides = Readonly<Record<string, unknown>>;

function encode(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(encode).join(',')}]`;
  if (typeof value === 'object' && value !== null) return objectText(Object.entries(value));
  return JSON.stringify(value) ?? 'null';
}

function objectText(entries: ReadonlyArray<readonly [string, unknown]>): string {
  return `{${entries
    .filter(([, value]) => value !== OMIT)
    .map(([key, value]) => `${JSON.stringify(key)}:${encode(value)}`)
    .join(',')}}`;
}

/** A message's JSON bytes: `base` with `overrides` applied (new keys appended, in order). */
function messageBytes(base: Record<string, unknown>, overrides: Overrides): Buffer {
  const entries: Array<[string, unknown]> = Object.entries(base).map(([key, value]) => [key, key in overrides ? overrides[key] : value]);
  for (const [key, value] of Object.entries(overrides)) if (!(key in base)) entries.push([key, value]);
  return Buffer.from(objectText(entries), 'utf8');
}

function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

const rejected = (reason: RejectionReason, field?: string): CorpusOutcome => ({ kind: 'dead_letter', reason, field });
const SUPERSEDED: CorpusOutcome = { kind: 'superseded' };
/** `stored` with column overrides; the case builder completes the row. */
const stored = (columns: RowText = {}) => ({ kind: 'stored' as const, columns });
type Expectation = CorpusOutcome | ReturnType<typeof stored>;

interface CaseOptions {
  readonly partition?: number;
  readonly group?: string;
  readonly later?: boolean;
}

// Rows of the docs/design.md appendix messages as they must read back (hand-derived).
const REVIEW_ROW: RowText = {
  application_id: '101',
  user_name: 'Sara K.',
  content: 'Accurate forecasts, but the widget stopped updating.',
  score: '3',
  thumbs_up_count: '17',
  review_created_version: '7.4.0',
  app_version: '7.4.1',
  reviewed_at: '2026-11-28T19:44:02.000000',
  reply_content: null,
  replied_at: null,
  last_synced_at: '2026-11-30T06:02:11.480113',
};

const APP_STATS_ROW: RowText = {
  application_id: '101',
  score: doubleText(4.31),
  ratings_count: '182734',
  reviews_count: '40211',
  min_installs: '10000000',
  real_installs: '14532118',
  histogram: '{9120,3011,7420,30110,133073}',
  price: '0.00',
  currency: 'USD',
  app_version: '7.4.1',
  app_updated_at: '2026-11-21T14:03:00.000000',
};

const NETWORK_ROW: RowText = {
  application_id: '101',
  captured_at: '2026-11-30T09:15:00.000000',
  duration_ms: '60000',
  packet_count: '8412',
  bytes_sent: '412330',
  bytes_received: '5120987',
  tcp_connections: '23',
  dns_queries: '41',
  unique_hosts: '12',
  avg_rtt_ms: doubleText(38.2),
  retransmission_rate: doubleText(0.004),
  protocols: '{"dns": 82, "tls": 7010, "quic": 1320}',
  analyzer_version: '1.8.0',
};

const cases: CorpusCase[] = [];

function add(name: string, topic: PipelineName, value: Buffer | null, expect: CorpusOutcome, options: CaseOptions = {}): void {
  if (cases.some((existing) => existing.name === name)) throw new Error(`duplicate corpus case name: ${name}`);
  cases.push({ name, topic, partition: options.partition ?? 0, value, group: options.group, later: options.later, expect });
}

function complete(expect: Expectation, row: RowText): CorpusOutcome {
  return expect.kind === 'stored' && 'columns' in expect ? { kind: 'stored', row: { ...row, ...expect.columns } } : (expect as CorpusOutcome);
}

/** A review case; its `review_id` is `corpus:<slug of name>` unless overridden. */
function review(name: string, overrides: Overrides, expect: Expectation, options?: CaseOptions): void {
  const reviewId = typeof overrides.review_id === 'string' ? overrides.review_id : `corpus:${slug(name)}`;
  const value = messageBytes(sampleReview(), { review_id: reviewId, ...overrides });
  add(name, 'reviews', value, complete(expect, { ...REVIEW_ROW, review_id: reviewId }), options);
}

let crawl = 0;
/** An app-stats case; its `crawled_at` is a distinct instant per case unless overridden. */
function appStats(name: string, overrides: Overrides, expect: Expectation, options?: CaseOptions): void {
  crawl += 1;
  const crawledAt = `2026-01-01T00:${String(Math.floor(crawl / 60)).padStart(2, '0')}:${String(crawl % 60).padStart(2, '0')}.654321`;
  const value = messageBytes(sampleAppStats(), { crawled_at: crawledAt, ...overrides });
  add(name, 'app-stats', value, complete(expect, { ...APP_STATS_ROW, crawled_at: crawledAt }), options);
}

let analysis = 0;
/** A network-metrics case; its `analysis_id` is a distinct UUID per case unless overridden. */
function networkMetrics(name: string, overrides: Overrides, expect: Expectation, options?: CaseOptions): void {
  analysis += 1;
  const analysisId = `c0c0a000-0000-4000-8000-${String(analysis).padStart(12, '0')}`;
  const value = messageBytes(sampleNetworkMetrics(), { analysis_id: analysisId, ...overrides });
  add(name, 'network-metrics', value, complete(expect, { ...NETWORK_ROW, analysis_id: analysisId }), options);
}

const utf8 = (text: string) => Buffer.from(text, 'utf8');
const validReviewText = () => JSON.stringify({ ...sampleReview(), review_id: 'corpus:bytes' });

// ---- bytes, encoding, JSON ------------------------------------------------------------------

add('not UTF-8 at all (random high bytes)', 'reviews', Buffer.from([0xff, 0xfe, 0xfd, 0x80, 0x81]), rejected('invalid_encoding'));
add('UTF-16LE JSON with a byte order mark', 'reviews', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(validReviewText(), 'utf16le')]), rejected('invalid_encoding'));
add('truncated UTF-8 (a multi-byte sequence cut at the end)', 'reviews', utf8(validReviewText()).subarray(0, 30).fill(0xe2, 29, 30), rejected('invalid_encoding'));
add('truncated UTF-8 inside a string value', 'reviews', Buffer.concat([utf8('{"review_id":"caf'), Buffer.from([0xc3]), utf8('","score":3}')]), rejected('invalid_encoding'));
add('overlong UTF-8 encoding of "/"', 'reviews', Buffer.concat([utf8('{"review_id":"a'), Buffer.from([0xc0, 0xaf]), utf8('"}')]), rejected('invalid_encoding'));
add('UTF-8-encoded surrogate half (CESU-8)', 'app-stats', Buffer.concat([utf8('{"package_name":"'), Buffer.from([0xed, 0xa0, 0x80]), utf8('"}')]), rejected('invalid_encoding'));
add('Latin-1 text in a JSON string', 'network-metrics', Buffer.from('{"analyzer_version":"café"}', 'latin1'), rejected('invalid_encoding'));
add('UTF-8 byte order mark before the JSON', 'reviews', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8(validReviewText())]), rejected('invalid_json'));
add('truncated JSON', 'reviews', utf8(validReviewText().slice(0, -10)), rejected('invalid_json'));
add('JSON with single quotes', 'app-stats', utf8("{'package_name': 'com.example.weather'}"), rejected('invalid_json'));
add('JSON with a trailing comma', 'network-metrics', utf8('{"analysis_id":"c0c0a000-0000-4000-8000-000000000000",}'), rejected('invalid_json'));
add('JSON with a NaN literal', 'app-stats', messageBytes(sampleAppStats(), { score: raw('NaN') }), rejected('invalid_json'));
add('a raw control character inside a JSON string', 'reviews', utf8(validReviewText().replace('Sara K.', 'Sara\u0001K.')), rejected('invalid_json'));
add('whitespace only', 'reviews', utf8(' \n\t '), rejected('invalid_json'));
add('two JSON objects back to back', 'reviews', utf8(`${validReviewText()}${validReviewText()}`), rejected('invalid_json'));
add('JSON array, not an object', 'reviews', utf8(`[${validReviewText()}]`), rejected('invalid_message', 'message'));
add('JSON string, not an object', 'app-stats', utf8('"com.example.weather"'), rejected('invalid_message', 'message'));
add('JSON number, not an object', 'network-metrics', utf8('42'), rejected('invalid_message', 'message'));
add('the JSON text null (not a null value)', 'reviews', utf8('null'), rejected('invalid_message', 'message'));
add('empty value (0 bytes)', 'reviews', Buffer.alloc(0), rejected('empty_message'));
add('null value (tombstone)', 'app-stats', null, rejected('empty_message'));
add('empty JSON object', 'network-metrics', utf8('{}'), rejected('invalid_message'));

// ---- every required field missing, and null ---------------------------------------------------

for (const field of ['review_id', 'package_name', 'score', 'thumbs_up_count', 'reviewed_at', 'last_synced_at']) {
  review(`reviews without required ${field}`, { [field]: OMIT }, rejected('invalid_message', field));
}
for (const field of ['package_name', 'crawled_at']) {
  appStats(`app-stats without required ${field}`, { [field]: OMIT }, rejected('invalid_message', field));
}
for (const field of ['analysis_id', 'package_name', 'captured_at', 'duration_ms', 'packet_count', 'bytes_sent', 'bytes_received']) {
  networkMetrics(`network-metrics without required ${field}`, { [field]: OMIT }, rejected('invalid_message', field));
}
review('required score is null', { score: null }, rejected('invalid_message', 'score'));
review('optional fields null and absent are NULL', { user_name: null, content: OMIT, app_version: null }, stored({ user_name: null, content: null, app_version: null }));
review('unknown extra fields are ignored', { extra: { nested: [1, 2, 3] }, thumbsUpCount: 99 }, stored());

// ---- wrong types ----------------------------------------------------------------------------

review('numeric string for an integer', { score: '3' }, rejected('invalid_message', 'score'));
review('float for an integer', { score: 3.5 }, rejected('invalid_message', 'score'));
review('boolean for an integer', { thumbs_up_count: true }, rejected('invalid_message', 'thumbs_up_count'));
review('whole float 17.0 is the integer 17', { thumbs_up_count: raw('17.0') }, stored({ thumbs_up_count: '17' }));
review('exponent 1e2 is the integer 100', { thumbs_up_count: raw('1e2') }, stored({ thumbs_up_count: '100' }));
review('number for a string', { user_name: 42 }, rejected('invalid_message', 'user_name'));
review('object for a timestamp', { reviewed_at: { seconds: 1 } }, rejected('invalid_message', 'reviewed_at'));
review('epoch number for a timestamp', { last_synced_at: 1_796_018_531 }, rejected('invalid_message', 'last_synced_at'));
appStats('numeric string for a BIGINT', { ratings_count: '182734' }, rejected('invalid_message', 'ratings_count'));
appStats('string for the histogram', { histogram: '9120,3011,7420,30110,133073' }, rejected('invalid_message', 'histogram'));
appStats('histogram of 4 values', { histogram: [1, 2, 3, 4] }, rejected('invalid_message', 'histogram'));
appStats('histogram of 6 values', { histogram: [1, 2, 3, 4, 5, 6] }, rejected('invalid_message', 'histogram'));
appStats('histogram with a negative count', { histogram: [1, 2, -3, 4, 5] }, rejected('invalid_message', 'histogram[2]'));
appStats('histogram of zeros', { histogram: [0, 0, 0, 0, 0] }, stored({ histogram: '{0,0,0,0,0}' }));
appStats('lower-case currency', { currency: 'usd' }, rejected('invalid_message', 'currency'));
appStats('price as a string', { price: '4.99' }, rejected('invalid_message', 'price'));
networkMetrics('float duration', { duration_ms: 60000.5 }, rejected('invalid_message', 'duration_ms'));
networkMetrics('protocols as an array', { protocols: [['tls', 1]] }, rejected('invalid_message', 'protocols'));
networkMetrics('protocol count as a string', { protocols: { tls: '7010' } }, rejected('invalid_message', 'protocols.tls'));

// ---- numeric bounds, just inside and just outside ------------------------------------------

review('review score 1 (lowest)', { score: 1 }, stored({ score: '1' }));
review('review score 5 (highest)', { score: 5 }, stored({ score: '5' }));
review('review score 0', { score: 0 }, rejected('invalid_message', 'score'));
review('review score 6', { score: 6 }, rejected('invalid_message', 'score'));
review('thumbs up 0', { thumbs_up_count: 0 }, stored({ thumbs_up_count: '0' }));
review('thumbs up -1', { thumbs_up_count: -1 }, rejected('invalid_message', 'thumbs_up_count'));
review('thumbs up 2^31-1 (INTEGER max)', { thumbs_up_count: 2_147_483_647 }, stored({ thumbs_up_count: '2147483647' }));
review('thumbs up 2^31 (beyond INTEGER)', { thumbs_up_count: 2_147_483_648 }, rejected('invalid_message', 'thumbs_up_count'));
review('thumbs up 17.0000000000000001 (parses as 17)', { thumbs_up_count: raw('17.0000000000000001') }, rejected('invalid_message', 'thumbs_up_count'));
appStats('score 0 (lowest)', { score: 0 }, stored({ score: doubleText(0) }));
appStats('score 5 (highest)', { score: 5 }, stored({ score: doubleText(5) }));
appStats('score -0.0001', { score: -0.0001 }, rejected('invalid_message', 'score'));
appStats('score 5.0000001', { score: 5.0000001 }, rejected('invalid_message', 'score'));
appStats('ratings 2^53-1 (largest exact)', { ratings_count: Number.MAX_SAFE_INTEGER }, stored({ ratings_count: '9007199254740991' }));
appStats('ratings 2^53 (not exact)', { ratings_count: raw('9007199254740992') }, rejected('invalid_message', 'ratings_count'));
appStats('ratings 2^53+1 (JSON.parse would round)', { ratings_count: raw('9007199254740993') }, rejected('invalid_message', 'ratings_count'));
appStats('installs 2^64', { real_installs: raw('18446744073709551616') }, rejected('invalid_message', 'real_installs'));
appStats('installs -1', { min_installs: -1 }, rejected('invalid_message', 'min_installs'));
appStats('price 9999999999.99 (NUMERIC(12,2) max)', { price: 9_999_999_999.99 }, stored({ price: '9999999999.99' }));
appStats('price 10000000000.00', { price: raw('10000000000.00') }, rejected('invalid_message', 'price'));
appStats('price 0.1 stored as 0.10', { price: 0.1 }, stored({ price: '0.10' }));
appStats('price 4.999 (3 decimals)', { price: 4.999 }, rejected('invalid_message', 'price'));
appStats('price 4.990000000000000001 (parses as 4.99)', { price: raw('4.990000000000000001') }, rejected('invalid_message', 'price'));
appStats('price -0.01', { price: -0.01 }, rejected('invalid_message', 'price'));
networkMetrics('retransmission rate 0 and 1', { retransmission_rate: 1, avg_rtt_ms: 0 }, stored({ retransmission_rate: doubleText(1), avg_rtt_ms: doubleText(0) }));
networkMetrics('retransmission rate 1.0000001', { retransmission_rate: 1.0000001 }, rejected('invalid_message', 'retransmission_rate'));
networkMetrics('avg rtt -0.1', { avg_rtt_ms: -0.1 }, rejected('invalid_message', 'avg_rtt_ms'));
networkMetrics('avg rtt 1e308 (finite)', { avg_rtt_ms: raw('1e308') }, stored({ avg_rtt_ms: doubleText(1e308) }));
networkMetrics('avg rtt 1e999 (Infinity once parsed)', { avg_rtt_ms: raw('1e999') }, rejected('invalid_message', 'avg_rtt_ms'));
networkMetrics('tcp connections 2^31', { tcp_connections: 2_147_483_648 }, rejected('invalid_message', 'tcp_connections'));
networkMetrics('bytes sent 2^53-1', { bytes_sent: Number.MAX_SAFE_INTEGER }, stored({ bytes_sent: '9007199254740991' }));
networkMetrics('duration 0 and tcp connections 2^31-1', { duration_ms: 0, tcp_connections: 2_147_483_647 }, stored({ duration_ms: '0', tcp_connections: '2147483647' }));
networkMetrics('duration -1', { duration_ms: -1 }, rejected('invalid_message', 'duration_ms'));
networkMetrics('duration 2^31', { duration_ms: 2_147_483_648 }, rejected('invalid_message', 'duration_ms'));
networkMetrics('unique hosts -1', { unique_hosts: -1 }, rejected('invalid_message', 'unique_hosts'));
appStats('counts 0 and a histogram value of 2^53-1', { reviews_count: 0, min_installs: 0, histogram: [0, 1, 2, 3, Number.MAX_SAFE_INTEGER] }, stored({ reviews_count: '0', min_installs: '0', histogram: '{0,1,2,3,9007199254740991}' }));
appStats('histogram value 2^53', { histogram: raw('[0,1,2,3,9007199254740992]') }, rejected('invalid_message', 'histogram[4]'));
networkMetrics('packet count -0 is 0', { packet_count: raw('-0') }, stored({ packet_count: '0' }));

// ---- text: NUL, surrogates, lengths counted in characters ----------------------------------

review('NUL in content', { content: 'before\u0000after' }, rejected('invalid_message', 'content'));
review('NUL in an unknown field name', { 'a\u0000b': 1 }, rejected('invalid_message'));
review('lone high surrogate in user name', { user_name: 'Sara \ud800' }, rejected('invalid_message', 'user_name'));
review('lone low surrogate in content', { content: '\udc00 text' }, rejected('invalid_message', 'content'));
review('user name of 255 emoji (510 UTF-16 units)', { user_name: '\u{1F600}'.repeat(255) }, stored({ user_name: '\u{1F600}'.repeat(255) }));
review('user name of 256 two-byte characters', { user_name: 'é'.repeat(256) }, rejected('invalid_message', 'user_name'));
review('review id of 255 CJK characters', { review_id: '中'.repeat(255) }, stored({ review_id: '中'.repeat(255) }));
review('review id of 256 characters', { review_id: 'r'.repeat(256) }, rejected('invalid_message', 'review_id'));
review('empty review id', { review_id: '' }, rejected('invalid_message', 'review_id'));
review('app version of 64 emoji', { app_version: '\u{1F680}'.repeat(64) }, stored({ app_version: '\u{1F680}'.repeat(64) }));
review('app version of 65 characters', { app_version: 'v'.repeat(65) }, rejected('invalid_message', 'app_version'));
review('content with every kind of text (RTL, combining, ZWJ, U+2028)', { content: 'שלום e\u0301 \u{1F469}\u200d\u{1F4BB} a\u2028b \t"\\' }, stored({ content: 'שלום e\u0301 \u{1F469}\u200d\u{1F4BB} a\u2028b \t"\\' }));
review('package name with a space', { package_name: 'com.example weather' }, rejected('invalid_message', 'package_name'));
review('empty package name', { package_name: '' }, rejected('invalid_message', 'package_name'));
review('package name of 256 characters', { package_name: 'p'.repeat(256) }, rejected('invalid_message', 'package_name'));
review('package name of 255 emoji (registered)', { package_name: '\u{1F326}'.repeat(255) }, stored({ application_id: '102' }));
networkMetrics('protocol name of 65 characters', { protocols: { ['p'.repeat(65)]: 1 } }, rejected('invalid_message', 'protocols'));
networkMetrics('protocol names __proto__ and 64 emoji', { protocols: { __proto__x: 0, ['\u{1F4E1}'.repeat(64)]: 5 } }, stored({ protocols: `{"__proto__x": 0, "${'\u{1F4E1}'.repeat(64)}": 5}` }));
networkMetrics('a __proto__ protocol name is kept', { protocols: raw('{"__proto__": 3, "tls": 1}') }, stored({ protocols: '{"tls": 1, "__proto__": 3}' }));
networkMetrics('empty protocol name', { protocols: { '': 1 } }, rejected('invalid_message', 'protocols'));

// ---- timestamps -----------------------------------------------------------------------------

review('timestamp without offset is UTC', { reviewed_at: '2026-11-28T19:44:02.123456' }, stored({ reviewed_at: '2026-11-28T19:44:02.123456' }));
review('timestamp with +03:30', { reviewed_at: '2026-11-28T01:00:00.5+03:30' }, stored({ reviewed_at: '2026-11-27T21:30:00.500000' }));
review('timestamp with -12:00 crossing a year', { replied_at: '2026-12-31T13:00:00.000001-12:00' }, stored({ replied_at: '2027-01-01T01:00:00.000001' }));
review('timestamp with odd offset +23:59', { replied_at: '2026-11-28T23:59:00+23:59' }, stored({ replied_at: '2026-11-28T00:00:00.000000' }));
review('timestamp with -00:00', { reviewed_at: '2026-11-28T19:44:02-00:00' }, stored({ reviewed_at: '2026-11-28T19:44:02.000000' }));
review('leap day 2024-02-29', { reviewed_at: '2024-02-29T12:00:00Z' }, stored({ reviewed_at: '2024-02-29T12:00:00.000000' }));
review('first instant 0001-01-01', { reviewed_at: '0001-01-01T00:00:00Z' }, stored({ reviewed_at: '0001-01-01T00:00:00.000000' }));
review('last microsecond 9999-12-31', { reviewed_at: '9999-12-31T23:59:59.999999Z' }, stored({ reviewed_at: '9999-12-31T23:59:59.999999' }));
review('timestamp with a space for T', { reviewed_at: '2026-11-28 19:44:02' }, rejected('invalid_message', 'reviewed_at'));
review('date alone', { reviewed_at: '2026-11-28' }, rejected('invalid_message', 'reviewed_at'));
review('offset without colon +0330', { reviewed_at: '2026-11-28T19:44:02+0330' }, rejected('invalid_message', 'reviewed_at'));
review('lower-case z', { reviewed_at: '2026-11-28T19:44:02z' }, rejected('invalid_message', 'reviewed_at'));
review('hour 24:00', { reviewed_at: '2026-11-28T24:00:00Z' }, rejected('invalid_message', 'reviewed_at'));
review('leap second :60', { reviewed_at: '2016-12-31T23:59:60Z' }, rejected('invalid_message', 'reviewed_at'));
review('7 fractional digits', { last_synced_at: '2026-11-30T06:02:11.4801139Z' }, rejected('invalid_message', 'last_synced_at'));
review('impossible date 2026-02-30', { reviewed_at: '2026-02-30T00:00:00Z' }, rejected('invalid_message', 'reviewed_at'));
review('2025-02-29 (not a leap year)', { reviewed_at: '2025-02-29T00:00:00Z' }, rejected('invalid_message', 'reviewed_at'));
review('year 0000', { reviewed_at: '0000-06-01T00:00:00Z' }, rejected('invalid_message', 'reviewed_at'));
review('offset moving 0001-01-01 into year 0', { reviewed_at: '0001-01-01T00:00:00+00:01' }, rejected('invalid_message', 'reviewed_at'));
review('offset +24:00', { reviewed_at: '2026-11-28T19:44:02+24:00' }, rejected('invalid_message', 'reviewed_at'));
appStats('crawl instant with microseconds and offset', { crawled_at: '2026-11-30T09:30:00.000007+03:30' }, stored({ crawled_at: '2026-11-30T06:00:00.000007' }));

// ---- UUIDs ------------------------------------------------------------------------------------

networkMetrics('upper-case UUID is stored in lower case', { analysis_id: 'C0C0B000-AAAA-4BBB-8CCC-DDDDEEEEFFFF' }, stored({ analysis_id: 'c0c0b000-aaaa-4bbb-8ccc-ddddeeeeffff' }));
networkMetrics('nil UUID', { analysis_id: '00000000-0000-0000-0000-000000000000' }, stored({ analysis_id: '00000000-0000-0000-0000-000000000000' }));
networkMetrics('UUID without hyphens', { analysis_id: 'c0c0b0000000400080000000000000aa' }, rejected('invalid_message', 'analysis_id'));
networkMetrics('UUID in braces', { analysis_id: '{c0c0b000-0000-4000-8000-0000000000ab}' }, rejected('invalid_message', 'analysis_id'));
networkMetrics('UUID with a non-hex digit', { analysis_id: 'c0c0b000-0000-4000-8000-00000000000g' }, rejected('invalid_message', 'analysis_id'));
networkMetrics('UUID one digit short', { analysis_id: 'c0c0b000-0000-4000-8000-00000000000' }, rejected('invalid_message', 'analysis_id'));

// ---- size ---------------------------------------------------------------------------------------

const BIG_TEXT = 'Long review text. '.repeat(6_000); // 108,000 bytes
add('invalid JSON above 64 KiB: truncated in the dead letter', 'reviews', utf8(`{"content":"${BIG_TEXT}`), {
  kind: 'dead_letter',
  reason: 'invalid_json',
  truncated: true,
});
review('NUL at the end of a 100 KiB content: truncated in the dead letter', { content: `${BIG_TEXT}\u0000` }, {
  kind: 'dead_letter',
  reason: 'invalid_message',
  field: 'content',
  truncated: true,
});
review('valid review with a 100 KiB content', { content: BIG_TEXT }, stored({ content: BIG_TEXT }));
review('unknown app with a 100 KiB content: kept whole', { package_name: UNKNOWN_PACKAGE, content: BIG_TEXT }, rejected('unknown_application'));
review('deeply nested unknown field', { extra: raw(`${'['.repeat(5_000)}${']'.repeat(5_000)}`) }, stored());

// ---- legacy and unknown apps ------------------------------------------------------------------

add(
  'legacy camelCase review from the scraper',
  'reviews',
  utf8(
    JSON.stringify({
      reviewId: 'gp:legacy-1',
      userName: 'Sara K.',
      content: 'Old format',
      score: 4,
      thumbsUpCount: 2,
      reviewCreatedVersion: '7.3.0',
      at: '2026-01-01T10:00:00',
      replyContent: null,
      repliedAt: null,
      appVersion: '7.3.0',
    }),
  ),
  rejected('invalid_message', 'review_id'),
);
add(
  'legacy camelCase app details from the scraper',
  'app-stats',
  utf8(JSON.stringify({ appId: 'com.example.weather', installs: '10,000,000+', score: 4.3, ratings: 182000, histogram: [1, 2, 3, 4, 5] })),
  rejected('invalid_message', 'package_name'),
);
review('unknown app', { package_name: UNKNOWN_PACKAGE }, rejected('unknown_application'));
appStats('package name in another case is another app', { package_name: 'Com.Example.Weather' }, rejected('unknown_application'));
networkMetrics('unknown app for a network capture', { package_name: UNKNOWN_PACKAGE }, rejected('unknown_application'));
review('inactive (soft-deleted) app is stored', { package_name: 'com.example.retired' }, stored({ application_id: '103' }));

// ---- duplicate keys within a batch, across partitions, across batches --------------------------

review('duplicate review, older version (partition 0)', { review_id: 'corpus:dup-review', last_synced_at: '2026-11-30T06:00:00Z', thumbs_up_count: 1 }, SUPERSEDED, {
  group: 'dup-review',
});
review(
  'duplicate review, newer version (partition 1)',
  { review_id: 'corpus:dup-review', last_synced_at: '2026-11-30T07:00:00Z', thumbs_up_count: 2 },
  stored({ thumbs_up_count: '2', last_synced_at: '2026-11-30T07:00:00.000000' }),
  { partition: 1, group: 'dup-review' },
);
review('duplicate review, same instant written another way (partition 2)', { review_id: 'corpus:dup-review', last_synced_at: '2026-11-30T10:30:00+03:30', thumbs_up_count: 3 }, SUPERSEDED, {
  partition: 2,
  group: 'dup-review',
});
review('replayed older version of the duplicate review in a later batch', { review_id: 'corpus:dup-review', last_synced_at: '2026-11-30T06:30:00Z', thumbs_up_count: 9 }, SUPERSEDED, {
  later: true,
  group: 'dup-review-late',
});
review('review tie on last_synced_at: the first in the event wins', { review_id: 'corpus:tie', thumbs_up_count: 5 }, stored({ thumbs_up_count: '5' }), { group: 'tie' });
review('review tie on last_synced_at: the second loses', { review_id: 'corpus:tie', thumbs_up_count: 6 }, SUPERSEDED, { partition: 1, group: 'tie' });
appStats('same crawl instant, first form (partition 1)', { crawled_at: '2026-11-30T03:00:00Z', score: 1 }, stored({ crawled_at: '2026-11-30T03:00:00.000000', score: doubleText(1) }), {
  partition: 1,
  group: 'dup-crawl',
});
appStats('same crawl instant, with an offset (partition 2)', { crawled_at: '2026-11-30T06:30:00.000000+03:30', score: 2 }, SUPERSEDED, {
  partition: 2,
  group: 'dup-crawl',
});
networkMetrics('same analysis id in lower case (partition 0)', { analysis_id: 'c0c0c000-0000-4000-8000-0000000000ab', duration_ms: 1 }, stored({ analysis_id: 'c0c0c000-0000-4000-8000-0000000000ab', duration_ms: '1' }), {
  group: 'dup-analysis',
});
networkMetrics('same analysis id in upper case (partition 1)', { analysis_id: 'C0C0C000-0000-4000-8000-0000000000AB', duration_ms: 2 }, SUPERSEDED, {
  partition: 1,
  group: 'dup-analysis',
});
networkMetrics('same analysis id again in a later batch', { analysis_id: 'c0c0c000-0000-4000-8000-0000000000ab', duration_ms: 3 }, SUPERSEDED, {
  later: true,
  group: 'dup-analysis-late',
});

/** Every corpus case, in definition order. */
export const CORPUS: readonly CorpusCase[] = cases;

/**
 * The `index`-th good message of a topic, placed between corpus cases: it must be stored exactly,
 * whatever its neighbours are.
 */
export function goodNeighbour(topic: PipelineName, index: number): { readonly value: Buffer; readonly row: RowText } {
  const n = String(index).padStart(6, '0');
  switch (topic) {
    case 'reviews': {
      const reviewId = `neighbour:${n}`;
      return { value: messageBytes(sampleReview(), { review_id: reviewId, thumbs_up_count: index }), row: { ...REVIEW_ROW, review_id: reviewId, thumbs_up_count: String(index) } };
    }
    case 'app-stats': {
      const crawledAt = `2025-06-01T12:00:00.${n}`;
      return { value: messageBytes(sampleAppStats(), { crawled_at: `${crawledAt}Z` }), row: { ...APP_STATS_ROW, crawled_at: crawledAt } };
    }
    case 'network-metrics': {
      const analysisId = `0e1b0000-0000-4000-8000-${n.padStart(12, '0')}`;
      return { value: messageBytes(sampleNetworkMetrics(), { analysis_id: analysisId }), row: { ...NETWORK_ROW, analysis_id: analysisId } };
    }
  }
}
