/**
 * The `network-metrics` topic's message contract, v1 (docs/design.md section 5): its zod schema,
 * built from the blocks of fields.ts, text.ts, numbers.ts and timestamps.ts, its message type and
 * its decoder. shared/pipelines.ts binds it to the `network_metrics` table.
 */
import { z } from 'zod';
import { createDecoder } from './decode.js';
import { optional } from './fields.js';
import { finiteNumber, integer, protocols } from './numbers.js';
import { packageName, text, uuid } from './text.js';
import { timestamp } from './timestamps.js';
import type { Decoder, MessageOf } from './decoder.js';

const bigCount = integer('bigint', { min: 0 });
const count = optional(integer('integer', { min: 0 }));

/** Contract v1 of the `network-metrics` topic (docs/design.md section 5). */
export const networkMetricsSchema = z.object({
  analysis_id: uuid,
  package_name: packageName,
  captured_at: timestamp,
  duration_ms: integer('integer', { min: 0 }),
  packet_count: bigCount,
  bytes_sent: bigCount,
  bytes_received: bigCount,
  tcp_connections: count,
  dns_queries: count,
  unique_hosts: count,
  avg_rtt_ms: optional(finiteNumber({ min: 0 })),
  retransmission_rate: optional(finiteNumber({ min: 0, max: 1 })),
  protocols: optional(protocols),
  analyzer_version: optional(text({ max: 64 })),
});

/** `network-metrics` message, contract v1. */
export type NetworkMetricsMessage = MessageOf<typeof networkMetricsSchema>;

/** Decodes one `network-metrics` record value; never throws. */
export const decodeNetworkMetrics: Decoder<NetworkMetricsMessage> = createDecoder(networkMetricsSchema);
