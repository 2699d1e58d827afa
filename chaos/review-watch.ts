import type { Queryable } from '../shared/queryable.js';

/**
 * Watches the two `reviews` columns the storage consumer must never write: `first_seen_at` (set
 * on insert, never moved by an update) and `sentiment` (owned by a future sentiment service).
 * During the run it notes every review's `first_seen_at` and, playing that sentiment service,
 * scores some reviews; at the end both must be exactly as noted, through every later update.
 */
export class ReviewWatch {
  private readonly firstSeen = new Map<string, string>();
  private readonly scored = new Set<string>();

  /** The sentiment the watch writes for a review: a multiple of 1/8, exact in REAL. */
  static sentimentOf(reviewId: string): number {
    let hash = 0x811c9dc5;
    for (let i = 0; i < reviewId.length; i++) hash = Math.imul(hash ^ reviewId.charCodeAt(i), 0x01000193) >>> 0;
    return (hash % 1000) / 8;
  }

  /** Reviews whose `first_seen_at` was noted. */
  get observed(): number {
    return this.firstSeen.size;
  }

  /** Reviews the watch scored. */
  get scoredCount(): number {
    return this.scored.size;
  }

  /**
   * Notes `first_seen_at` of reviews not seen before, then scores up to `score` unscored reviews
   * in one statement (it may lose a deadlock against the consumer's upserts; then it scored none).
   */
  async observe(client: Queryable, score = 500): Promise<void> {
    const rows = await client.query<{ review_id: string; first_seen: string }>(
      `SELECT review_id, to_char(first_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS first_seen FROM reviews`,
    );
    const unscored: string[] = [];
    for (const row of rows.rows) {
      if (!this.firstSeen.has(row.review_id)) this.firstSeen.set(row.review_id, row.first_seen);
      if (!this.scored.has(row.review_id) && unscored.length < score) unscored.push(row.review_id);
    }
    if (unscored.length === 0) return;
    try {
      await client.query(
        'UPDATE reviews SET sentiment = input.value FROM unnest($1::text[], $2::real[]) AS input(id, value) WHERE reviews.review_id = input.id',
        [unscored, unscored.map((id) => ReviewWatch.sentimentOf(id))],
      );
      for (const id of unscored) this.scored.add(id);
    } catch {
      // Not applied (a deadlock victim, or the server went away): nothing to remember.
    }
  }

  /** Reviews whose `first_seen_at` moved, and reviews whose `sentiment` is not what was written. */
  async verify(client: Queryable): Promise<{ moved: string[]; overwritten: string[] }> {
    const rows = await client.query<{ review_id: string; first_seen: string; sentiment: number | null }>(
      `SELECT review_id, to_char(first_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS first_seen,
              sentiment::float8 AS sentiment FROM reviews`,
    );
    const moved: string[] = [];
    const overwritten: string[] = [];
    for (const row of rows.rows) {
      const noted = this.firstSeen.get(row.review_id);
      if (noted !== undefined && noted !== row.first_seen) moved.push(`${row.review_id}: first_seen_at ${noted} -> ${row.first_seen}`);
      const expected = ReviewWatch.sentimentOf(row.review_id);
      // A score whose commit the watch could not confirm may be there too: the same value.
      const fine = this.scored.has(row.review_id) ? row.sentiment === expected : row.sentiment === null || row.sentiment === expected;
      if (!fine)
        overwritten.push(
          `${row.review_id}: sentiment ${String(row.sentiment)}, written ${this.scored.has(row.review_id) ? expected : 'none'}`,
        );
    }
    return { moved, overwritten };
  }
}
