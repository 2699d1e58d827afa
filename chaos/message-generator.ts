/**
 * The message kinds of the chaos workload: app-stats crawls (some re-sent), reviews synced
 * several times (some versions produced late), network captures (some re-sent), and poison of
 * every rejection reason. The expected rows are computed from the generated values, never by
 * running the product's decoder.
 */
import type { PipelineName } from '../shared/pipelines.js';
import type { RejectionReason } from '../shared/records.js';
import { CORPUS } from '../fixtures/corpus.js';
import type { ChaosApp, PlannedOutcome } from './plan.js';
import { REFUSED_MARKERS, tableOf } from './plan.js';
import type { Random } from './random.js';
import type { RowText } from '../fixtures/row-text.js';
import { doubleText } from '../fixtures/row-text.js';
import { jsonbObjectText } from './stored-rows.js';
import {
  codePoints,
  count,
  instant,
  MICROS_PER_HOUR,
  pad,
  sentence,
  UNKNOWN_PACKAGES,
  utcText,
  version,
  writtenTimestamp,
} from './values.js';

// ---- messages -----------------------------------------------------------------------------------

/** A message before the workload is put in production order. */
export interface Draft {
  readonly time: number;
  readonly topic: PipelineName;
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly expect: PlannedOutcome;
  readonly label: string;
}

const json = (message: Record<string, unknown>) => Buffer.from(JSON.stringify(message), 'utf8');

/** Generates the messages of each kind, and their expected outcomes, into `drafts`. */
export class MessageGenerator {
  readonly drafts: Draft[] = [];
  private crawls = new Map<string, number>();
  private reviewCount = 0;

  constructor(
    private readonly random: Random,
    private readonly apps: readonly ChaosApp[],
    private readonly runTag: string,
  ) {}

  private app(): ChaosApp {
    return this.random.pick(this.apps);
  }

  /** One crawl of one app (and, sometimes, the same crawl re-sent, possibly written another way). */
  appStats(time: number): number {
    const { random } = this;
    const app = this.app();
    const crawl = (this.crawls.get(app.id) ?? 0) + 1;
    this.crawls.set(app.id, crawl);
    const crawledAt = instant(crawl, random);
    const updatedAt = random.chance(0.8) ? instant(crawl - random.int(1, 400), random) : null;
    const score = random.chance(0.9) ? random.next() * 5 : null;
    const cents = random.chance(0.7) ? 0 : random.chance(0.98) ? random.int(1, 9_999) : random.int(0, 999_999_999_999);
    const histogram = random.chance(0.9) ? [count(random), count(random), count(random), count(random), count(random)] : null;
    const fields = {
      ratings_count: random.chance(0.9) ? count(random) : null,
      reviews_count: random.chance(0.9) ? count(random) : null,
      min_installs: random.chance(0.9) ? count(random) : null,
      real_installs: random.chance(0.9) ? count(random) : null,
    };
    const currency = random.chance(0.9) ? random.pick(['USD', 'EUR', 'IRR', 'JPY']) : null;
    const appVersion = random.chance(0.95) ? version(random) : null;
    const text: RowText = {
      application_id: app.id,
      crawled_at: utcText(crawledAt),
      score: doubleText(score),
      ratings_count: fields.ratings_count === null ? null : String(fields.ratings_count),
      reviews_count: fields.reviews_count === null ? null : String(fields.reviews_count),
      min_installs: fields.min_installs === null ? null : String(fields.min_installs),
      real_installs: fields.real_installs === null ? null : String(fields.real_installs),
      histogram: histogram === null ? null : `{${histogram.join(',')}}`,
      price: `${Math.floor(cents / 100)}.${pad(cents % 100, 2)}`,
      currency,
      app_version: appVersion,
      app_updated_at: updatedAt === null ? null : utcText(updatedAt),
    };
    const message = (written: string) => ({
      package_name: app.packageName,
      crawled_at: written,
      score,
      ...fields,
      histogram,
      price: cents / 100,
      currency,
      version: appVersion,
      app_updated_at: updatedAt === null ? null : writtenTimestamp(updatedAt, random),
      crawler: 'chaos',
    });
    const expect: PlannedOutcome = { kind: 'row', table: 'app_stats', key: `${app.id}|${text.crawled_at}`, text };
    this.drafts.push({
      time,
      topic: 'app-stats',
      key: app.packageName,
      value: json(message(writtenTimestamp(crawledAt, random))),
      expect,
      label: 'app-stats',
    });
    if (!random.chance(0.03)) return 1;
    // The crawler re-sent the crawl later, the instant maybe written with another offset: one row.
    const again = json(message(writtenTimestamp(crawledAt, random)));
    this.drafts.push({
      time: time + random.next() * (1 - time),
      topic: 'app-stats',
      key: app.packageName,
      value: again,
      expect,
      label: 'app-stats (re-sent)',
    });
    return 2;
  }

  /** A review synced `versions` times with increasing last_synced_at; some versions produced late. */
  review(times: number[]): void {
    const { random } = this;
    const app = this.app();
    this.reviewCount += 1;
    const reviewId = random.chance(0.02)
      ? `gp:${codePoints(random, 200, true)}-${this.runTag}-${this.reviewCount}`
      : `gp:${this.runTag}-${this.reviewCount}-${random.hex(8)}`;
    const reviewedAt = instant(random.int(0, 100), random);
    const userName = random.chance(0.9) ? (random.chance(0.02) ? codePoints(random, 255, true) : sentence(random, 2)) : null;
    const createdVersion = random.chance(0.8) ? version(random) : null;
    let syncedAt = instant(random.int(101, 200), random);
    let thumbs = random.int(0, 10);
    let content: string | null = random.chance(0.95) ? sentence(random, random.int(3, 40)) : null;
    let reply: { text: string; at: number } | null = null;
    const versions: Array<{ text: RowText; value: Buffer; syncedAt: string }> = [];
    for (let v = 0; v < times.length; v++) {
      if (v > 0) {
        // A same-instant re-sync (the first one stored wins) now and then; usually hours later.
        if (!random.chance(0.03)) syncedAt += random.int(1, 48 * MICROS_PER_HOUR);
        thumbs += random.int(0, 50);
        if (random.chance(0.3))
          content = random.chance(0.01) ? sentence(random, random.int(500, 2_000)) : sentence(random, random.int(3, 40));
        if (reply === null && random.chance(0.3))
          reply = { text: sentence(random, random.int(2, 20)), at: syncedAt - random.int(0, MICROS_PER_HOUR) };
      }
      if (thumbs > 2_147_483_647) thumbs = 2_147_483_647;
      const score = random.int(1, 5);
      const appVersion = random.chance(0.9) ? version(random) : null;
      const text: RowText = {
        review_id: reviewId,
        application_id: app.id,
        user_name: userName,
        content,
        score: String(score),
        thumbs_up_count: String(thumbs),
        review_created_version: createdVersion,
        app_version: appVersion,
        reviewed_at: utcText(reviewedAt),
        reply_content: reply?.text ?? null,
        replied_at: reply === null ? null : utcText(reply.at),
        last_synced_at: utcText(syncedAt),
      };
      const message = {
        review_id: reviewId,
        package_name: app.packageName,
        user_name: userName,
        content,
        score,
        thumbs_up_count: thumbs,
        review_created_version: createdVersion,
        app_version: appVersion,
        reviewed_at: writtenTimestamp(reviewedAt, random),
        reply_content: reply?.text ?? null,
        replied_at: reply === null ? null : writtenTimestamp(reply.at, random),
        last_synced_at: writtenTimestamp(syncedAt, random),
      };
      versions.push({ text, value: json(message), syncedAt: text.last_synced_at as string });
    }
    // Versions are produced in sync order, except that now and then an older one comes late.
    const order = [...times].sort((a, b) => a - b);
    let late = -1;
    if (order.length > 1 && random.chance(0.25)) {
      late = random.int(0, order.length - 2);
      const swapped = order[late] as number;
      order[late] = order[late + 1] as number;
      order[late + 1] = swapped;
    }
    versions.forEach((version, v) => {
      this.drafts.push({
        time: order[v] as number,
        topic: 'reviews',
        key: reviewId,
        value: version.value,
        expect: { kind: 'row', table: 'reviews', key: reviewId, text: version.text, syncedAt: version.syncedAt },
        label: v === late ? 'review (older version produced late)' : versions.length > 1 ? 'review (re-synced)' : 'review',
      });
    });
  }

  /** One network capture (and, sometimes, the same analysis re-sent, maybe with an upper-case id). */
  networkMetrics(time: number): number {
    const { random } = this;
    const app = this.app();
    const analysisId = `${random.hex(8)}-${random.hex(4)}-4${random.hex(3)}-${random.pick(['8', '9', 'a', 'b'])}${random.hex(3)}-${random.hex(12)}`;
    const capturedAt = instant(random.int(0, 2_000), random);
    const protocols: Record<string, number> | null = random.chance(0.9) ? {} : null;
    if (protocols)
      for (const name of ['tls', 'dns', 'quic', 'http/2', 'پروتکل', '\u{1F4E1}']) if (random.chance(0.5)) protocols[name] = count(random);
    const fields = {
      duration_ms: random.int(0, 2_147_483_647),
      packet_count: count(random),
      bytes_sent: count(random),
      bytes_received: count(random),
      tcp_connections: random.chance(0.9) ? random.int(0, 2_147_483_647) : null,
      dns_queries: random.chance(0.9) ? random.int(0, 10_000) : null,
      unique_hosts: random.chance(0.9) ? random.int(0, 500) : null,
      avg_rtt_ms: random.chance(0.9) ? random.next() * 1_000 : null,
      retransmission_rate: random.chance(0.9) ? random.next() : null,
    };
    const analyzerVersion = random.chance(0.9) ? version(random) : null;
    const text: RowText = {
      analysis_id: analysisId,
      application_id: app.id,
      captured_at: utcText(capturedAt),
      duration_ms: String(fields.duration_ms),
      packet_count: String(fields.packet_count),
      bytes_sent: String(fields.bytes_sent),
      bytes_received: String(fields.bytes_received),
      tcp_connections: fields.tcp_connections === null ? null : String(fields.tcp_connections),
      dns_queries: fields.dns_queries === null ? null : String(fields.dns_queries),
      unique_hosts: fields.unique_hosts === null ? null : String(fields.unique_hosts),
      avg_rtt_ms: doubleText(fields.avg_rtt_ms),
      retransmission_rate: doubleText(fields.retransmission_rate),
      protocols: jsonbObjectText(protocols),
      analyzer_version: analyzerVersion,
    };
    const message = (id: string) => ({
      analysis_id: id,
      package_name: app.packageName,
      captured_at: writtenTimestamp(capturedAt, random),
      ...fields,
      protocols,
      analyzer_version: analyzerVersion,
    });
    const expect: PlannedOutcome = { kind: 'row', table: 'network_metrics', key: analysisId, text };
    this.drafts.push({
      time,
      topic: 'network-metrics',
      key: analysisId,
      value: json(message(analysisId)),
      expect,
      label: 'network-metrics',
    });
    if (!random.chance(0.03)) return 1;
    const id = random.chance(0.5) ? analysisId.toUpperCase() : analysisId;
    this.drafts.push({
      time: time + random.next() * (1 - time),
      topic: 'network-metrics',
      key: id,
      value: json(message(id)),
      expect,
      label: 'network-metrics (re-sent)',
    });
    return 2;
  }

  /** One valid message of a pipeline; a pipeline without a generator here is refused by name, never generated as another's. */
  valid(topic: PipelineName, time: number): void {
    const generators: { readonly [N in PipelineName]?: () => unknown } = {
      'app-stats': () => this.appStats(time),
      reviews: () => this.review([time]),
      'network-metrics': () => this.networkMetrics(time),
    };
    const generate = generators[topic];
    if (generate === undefined) throw new Error(`chaos has no message generator for pipeline ${topic} (chaos/message-generator.ts)`);
    generate();
  }

  /** A message that can never be stored, of the given reason. */
  poison(time: number, topic: PipelineName, reason: RejectionReason): void {
    const { random } = this;
    const table = tableOf(topic);
    const dead = (value: Buffer | null, label: string, detailIncludes?: string, key: string | null = null) =>
      this.drafts.push({
        time,
        topic,
        key,
        value,
        expect: { kind: 'dead_letter', reason, detailIncludes },
        label: `poison: ${reason} (${label})`,
      });
    if (reason === 'empty_message') {
      dead(random.chance(0.5) ? null : Buffer.alloc(0), 'null or empty value');
      return;
    }
    if (reason === 'unknown_application' || reason === 'rejected_by_database') {
      // A valid message for an app nobody registered, or carrying the value the database refuses.
      const before = this.drafts.length;
      this.valid(topic, time);
      const [draft] = this.drafts.splice(before);
      if (draft === undefined || draft.value === null) throw new Error('no draft to poison');
      const message = JSON.parse(draft.value.toString('utf8')) as Record<string, unknown>;
      if (reason === 'unknown_application') message.package_name = random.pick(UNKNOWN_PACKAGES);
      else {
        const marker = REFUSED_MARKERS[table];
        message[marker.column === 'app_version' ? 'version' : marker.column] = marker.value;
      }
      dead(
        json(message),
        reason === 'unknown_application' ? 'unregistered app' : `${REFUSED_MARKERS[table].column} refused by a CHECK`,
        reason === 'rejected_by_database' ? '23514' : undefined,
        draft.key,
      );
      return;
    }
    const cases = CORPUS.filter(
      (corpusCase) => corpusCase.topic === topic && corpusCase.expect.kind === 'dead_letter' && corpusCase.expect.reason === reason,
    );
    if (cases.length === 0) {
      // Not every reason has a corpus case on every topic; bytes that fail the same way do.
      const fallback: Partial<Record<RejectionReason, Buffer>> = {
        invalid_encoding: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
        invalid_json: Buffer.from('{"package_name": ', 'utf8'),
        invalid_message: Buffer.from('[]', 'utf8'),
      };
      dead(fallback[reason] ?? null, 'generated');
      return;
    }
    const chosen = random.pick(cases);
    dead(chosen.value, chosen.name, undefined, random.chance(0.5) ? `poison-${random.hex(6)}` : null);
  }
}
