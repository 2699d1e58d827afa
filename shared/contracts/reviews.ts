/**
 * The `reviews` topic's message contract, v1 (docs/design.md section 5): its zod schema, built from
 * the blocks of fields.ts, text.ts, numbers.ts and timestamps.ts, its message type and its decoder.
 * shared/pipelines.ts binds it to the `reviews` table.
 */
import { z } from 'zod';
import { createDecoder } from './decode.js';
import { optional } from './fields.js';
import { integer } from './numbers.js';
import { packageName, text } from './text.js';
import { timestamp } from './timestamps.js';
import type { Decoder, MessageOf } from './decoder.js';

const version = optional(text({ max: 64 }));

/** Contract v1 of the `reviews` topic (docs/design.md section 5). */
export const reviewSchema = z.object({
  review_id: text({ min: 1, max: 255 }),
  package_name: packageName,
  user_name: optional(text({ max: 255 })),
  content: optional(text()),
  score: integer('smallint', { min: 1, max: 5 }),
  thumbs_up_count: integer('integer', { min: 0 }),
  review_created_version: version,
  app_version: version,
  reviewed_at: timestamp,
  reply_content: optional(text()),
  replied_at: optional(timestamp),
  last_synced_at: timestamp,
});

/** `reviews` message, contract v1. */
export type ReviewMessage = MessageOf<typeof reviewSchema>;

/** Decodes one `reviews` record value; never throws. */
export const decodeReview: Decoder<ReviewMessage> = createDecoder(reviewSchema);
