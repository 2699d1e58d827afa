/**
 * A checker that cannot fail proves nothing. After a run, the self-test damages the database in
 * known ways (a row deleted, a value changed, a crawl stored under a second key, a dead letter
 * deleted, a `first_seen_at` moved) and checks that the checker reports exactly that damage.
 */
import type { Queryable } from '../shared/queryable.js';
import { checkDatabase } from './checker.js';
import type { DatabaseCheck } from './checker.js';
import type { ExpectedState } from './model.js';
import type { ReviewWatch } from './review-watch.js';

/** What the self-test expected the checker to report, and what it reported. */
export interface SelfTestResult {
  readonly passed: boolean;
  readonly expected: Counts;
  readonly reported: Counts;
}

/** The counts the damage moves. */
export interface Counts {
  readonly lost: number;
  readonly duplicated: number;
  readonly wrong: number;
  readonly dlqMissing: number;
  readonly moved: number;
}

function counts(check: DatabaseCheck, watch: { moved: readonly string[] }): Counts {
  return { lost: check.lost, duplicated: check.duplicated, wrong: check.wrong, dlqMissing: check.dlqMissing, moved: watch.moved.length };
}

/** Damages the (already checked, clean) database and re-checks it. Destructive: run it last. */
export async function checkerSelfTest(client: Queryable, expected: ExpectedState, watch: ReviewWatch): Promise<SelfTestResult> {
  const before = counts(await checkDatabase(client, expected), await watch.verify(client));
  const [lostReview, changedReview, movedReview] = [...expected.rows.reviews.keys()];
  const [crawl] = [...expected.rows.app_stats.keys()];
  const [letter] = [...expected.deadLetters.keys()];
  if (!lostReview || !changedReview || !movedReview || !crawl || !letter)
    throw new Error('the self-test needs 3 reviews, 1 crawl and 1 dead letter');
  const [topic, partition, offset] = letter.split('|');
  await client.query('DELETE FROM reviews WHERE review_id = $1', [lostReview]);
  await client.query('UPDATE reviews SET thumbs_up_count = thumbs_up_count + 1 WHERE review_id = $1', [changedReview]);
  await client.query(`UPDATE reviews SET first_seen_at = first_seen_at + interval '1 microsecond' WHERE review_id = $1`, [movedReview]);
  // The same crawl under a second key: its instant altered by one microsecond.
  await client.query(
    `INSERT INTO app_stats (application_id, crawled_at, score, ratings_count, reviews_count, min_installs, real_installs, histogram,
                            price, currency, app_version, app_updated_at, source_partition, source_offset)
     SELECT application_id, crawled_at + interval '1 microsecond', score, ratings_count, reviews_count, min_installs, real_installs,
            histogram, price, currency, app_version, app_updated_at, source_partition, source_offset
       FROM app_stats WHERE application_id || '|' || to_char(crawled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') = $1`,
    [crawl],
  );
  await client.query('DELETE FROM dead_letter_events WHERE topic = $1 AND partition = $2 AND kafka_offset = $3', [
    topic,
    partition,
    offset,
  ]);
  const reported = counts(await checkDatabase(client, expected), await watch.verify(client));
  const expectedCounts: Counts = {
    lost: before.lost + 1,
    duplicated: before.duplicated + 1,
    wrong: before.wrong + 1,
    dlqMissing: before.dlqMissing + 1,
    moved: before.moved + 1,
  };
  const passed = (Object.keys(expectedCounts) as Array<keyof Counts>).every((name) => reported[name] === expectedCounts[name]);
  return { passed, expected: expectedCounts, reported };
}
