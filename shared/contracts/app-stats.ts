/**
 * The `app-stats` topic's message contract, v1 (docs/design.md section 5): its zod schema, built
 * from the blocks of fields.ts, text.ts, numbers.ts and timestamps.ts, its message type and its
 * decoder. shared/pipelines.ts binds it to the `app_stats` table.
 */
import { z } from 'zod';
import { createDecoder } from './decode.js';
import { optional } from './fields.js';
import { finiteNumber, histogram, integer, price } from './numbers.js';
import { currency, packageName, text } from './text.js';
import { timestamp } from './timestamps.js';
import type { Decoder, MessageOf } from './decoder.js';

const count = optional(integer('bigint', { min: 0 }));

/** Contract v1 of the `app-stats` topic (docs/design.md section 5); `version` is stored as `app_version`. */
export const appStatsSchema = z.object({
  package_name: packageName,
  crawled_at: timestamp,
  score: optional(finiteNumber({ min: 0, max: 5 })),
  ratings_count: count,
  reviews_count: count,
  min_installs: count,
  real_installs: count,
  histogram: optional(histogram),
  // Exact decimal text with two decimals (`"4.99"`), never a rounded double.
  price: optional(price),
  currency: optional(currency),
  version: optional(text({ max: 64 })),
  app_updated_at: optional(timestamp),
});

/** `app-stats` message, contract v1. */
export type AppStatsMessage = MessageOf<typeof appStatsSchema>;

/** Decodes one `app-stats` record value; never throws. */
export const decodeAppStats: Decoder<AppStatsMessage> = createDecoder(appStatsSchema);
