/**
 * The peer benchmark's rows: N synthetic Google Play reviews, deterministic for a seed, in two
 * wire formats of the same logical rows (the kit's produce.mjs, ported unchanged):
 *  - `connect`: key and value as Kafka Connect JsonConverter envelopes `{"schema":..,"payload":..}`
 *    (schemas.enable=true), the value a flat struct the Debezium JDBC sink takes as the row, with
 *    `application_id` already resolved and timestamps as `io.debezium.time.ZonedTimestamp` strings;
 *  - `raw`: our contract (`package_name`, no `application_id`), key = review_id.
 * The packages are `com.peerbench.app1..50`, application id = the number.
 */
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Message } from 'kafkajs';

/** How many apps the rows spread over (ids 1..APPS). */
export const PEER_APPS = 50;

export type WireFormat = 'connect' | 'raw';

interface Review {
  readonly review_id: string;
  readonly application_id: number;
  readonly package_name: string;
  readonly user_name: string | null;
  readonly content: string;
  readonly score: number;
  readonly thumbs_up_count: number;
  readonly app_version: string | null;
  readonly reviewed_at: string;
  readonly last_synced_at: string;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'app great good bad crashes after update love it works fine but ads are too many please fix ' +
  'the login battery drain slow fast useful simple clean design interface notifications sync offline ' +
  'dark mode feature missing support team responded quickly five stars recommend terrible experience ' +
  'keeps freezing on my phone since version latest release improved a lot thanks developers easy to use ' +
  'subscription price expensive worth every penny cannot open videos loading forever'
).split(' ');
const EXTRAS = ['👍', '😡', 'très bien', 'عالی است', 'sehr gut', 'ñandú', '★★★★★', 'спасибо'];
const NAMES = [
  'Ana',
  'Reza',
  'John Smith',
  'Maria G.',
  'Sara',
  'Ali',
  'Chen Wei',
  'Fatemeh',
  'Lukas',
  'Priya K.',
  'A Google user',
  'Tom',
  'Olga',
  'Mehdi R.',
  'Yuki',
];
const SCORES = [5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 2, 1, 1, 1, 1]; // J-shaped like real stores
const CRAWL_MS = Date.UTC(2026, 10, 30, 6, 0, 0);
const DAY_MS = 86_400_000;

/** The generator: `next(i)` must be called for i = 0, 1, 2, ... in order (the seed's stream). */
function reviewStream(seed: number): (i: number) => Review {
  const rnd = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)] as T;
  const hex = (digits: number) =>
    Math.floor(rnd() * 16 ** digits)
      .toString(16)
      .padStart(digits, '0');
  const content = () => {
    const max = 70 + Math.floor(rnd() * 131); // 70..200 characters, never cut inside a word or emoji
    let text = pick(WORDS);
    text = (text[0] as string).toUpperCase() + text.slice(1);
    for (;;) {
      const word = rnd() < 0.04 ? pick(EXTRAS) : pick(WORDS);
      const separator = rnd() < 0.1 ? '. ' : ' ';
      if (text.length >= 70 && text.length + separator.length + word.length + 1 > max) break;
      text += separator + word;
    }
    return text + (rnd() < 0.5 ? '.' : '!');
  };
  return (i) => {
    const app = 1 + Math.floor(rnd() * PEER_APPS);
    return {
      review_id: `gp:${hex(8)}-${hex(4)}-4${hex(3)}-${hex(4)}-${i.toString(16).padStart(12, '0')}`,
      application_id: app,
      package_name: `com.peerbench.app${app}`,
      user_name: rnd() < 0.03 ? null : pick(NAMES),
      content: content(),
      score: pick(SCORES),
      thumbs_up_count: rnd() < 0.7 ? 0 : Math.min(100000, Math.floor(-Math.log(1 - rnd()) * 40)),
      app_version: rnd() < 0.05 ? null : `${1 + Math.floor(rnd() * 9)}.${Math.floor(rnd() * 20)}.${Math.floor(rnd() * 50)}`,
      reviewed_at: new Date(CRAWL_MS - Math.floor(rnd() * 30 * DAY_MS)).toISOString(),
      last_synced_at: new Date(CRAWL_MS + i).toISOString(),
    };
  };
}

const zoned = (field: string) => ({ field, type: 'string', name: 'io.debezium.time.ZonedTimestamp', version: 1 });
const KEY_SCHEMA = JSON.stringify({ type: 'struct', name: 'peer.reviews.Key', fields: [{ field: 'review_id', type: 'string' }] });
// A flat struct: its name must not end in ".Envelope" and it has no "op" field, or the sink would
// read it as a Debezium change event.
const VALUE_SCHEMA = JSON.stringify({
  type: 'struct',
  name: 'peer.reviews.Value',
  fields: [
    { field: 'review_id', type: 'string' },
    { field: 'application_id', type: 'int64' },
    { field: 'user_name', type: 'string', optional: true },
    { field: 'content', type: 'string', optional: true },
    { field: 'score', type: 'int16' },
    { field: 'thumbs_up_count', type: 'int32' },
    { field: 'app_version', type: 'string', optional: true },
    zoned('reviewed_at'),
    zoned('last_synced_at'),
  ],
});

function connectMessage(review: Review): { key: string; value: string } {
  const { package_name: _package, ...payload } = review;
  return {
    key: `{"schema":${KEY_SCHEMA},"payload":${JSON.stringify({ review_id: review.review_id })}}`,
    value: `{"schema":${VALUE_SCHEMA},"payload":${JSON.stringify(payload)}}`,
  };
}

function rawMessage(review: Review): { key: string; value: string } {
  const { application_id: _id, ...contract } = review;
  return { key: review.review_id, value: JSON.stringify(contract) };
}

/** The first review's id and `reviewed_at` for a seed, to check that timestamps round-trip. */
export function firstReview(seed: number): { reviewId: string; reviewedAt: string } {
  const review = reviewStream(seed)(0);
  return { reviewId: review.review_id, reviewedAt: review.reviewed_at };
}

/** What producing cost, for the log. */
export interface Produced {
  readonly topic: string;
  readonly format: WireFormat;
  readonly records: number;
  readonly bytes: number;
  readonly seconds: number;
}

/**
 * Produces `records` reviews in `format` to `topic`, which must exist (3 partitions), with the
 * default partitioner (by key), acks=all, 1000 per send, 4 sends in flight.
 */
export async function produceReviews(
  brokers: readonly string[],
  topic: string,
  format: WireFormat,
  records: number,
  seed = 42,
): Promise<Produced> {
  const kafka = new Kafka({ clientId: 'peer-bench-producer', brokers: [...brokers], logLevel: logLevel.WARN });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false });
  await producer.connect();
  const next = reviewStream(seed);
  const toMessage = format === 'connect' ? connectMessage : rawMessage;
  let bytes = 0;
  let produced = 0;
  const started = performance.now();
  const worker = async () => {
    while (produced < records) {
      const from = produced;
      produced = Math.min(records, produced + 1000);
      const messages: Message[] = [];
      for (let i = from; i < produced; i += 1) {
        // generated in order, so the seed gives the same rows in both formats
        const message = toMessage(next(i));
        bytes += Buffer.byteLength(message.key) + Buffer.byteLength(message.value);
        messages.push(message);
      }
      await producer.send({ topic, acks: -1, messages });
    }
  };
  try {
    await Promise.all([worker(), worker(), worker(), worker()]);
  } finally {
    await producer.disconnect();
  }
  return { topic, format, records, bytes, seconds: (performance.now() - started) / 1000 };
}
