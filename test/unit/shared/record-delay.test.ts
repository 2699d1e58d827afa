/** Freshness of a committed batch (shared/record-delay.ts). No services. */
import { describe, expect, it } from 'vitest';
import { NO_RECORD_DELAYS, recordDelays } from '../../../shared/record-delay.js';
import type { KafkaRecord } from '../../../shared/records.js';

const record = (offset: number, timestamp: number | null): KafkaRecord => ({
  topic: 'network-metrics',
  partition: 1,
  offset,
  timestamp,
  timestampType: timestamp === null ? null : 'CREATE_TIME',
  key: null,
  value: null,
  headers: [],
});

describe('record delays', () => {
  it('are the commit time minus each timestamp, in event order, leaving out records without one', () => {
    // Prepare: four records, one without a timestamp, one stamped after the commit (a clock ahead of ours)
    const records = [record(0, 1_000), record(1, null), record(2, 1_900), record(3, 2_500)];

    // Act: committed at 2,000
    const delays = recordDelays(records, 2_000);

    // Assess
    expect([...delays.ms]).toEqual([1_000, 100, 0]);
    expect(delays.maxMs).toBe(1_000);
  });

  it('are empty, with no maximum, for a batch with no timestamp at all', () => {
    expect(recordDelays([record(0, null), record(1, null)], 5_000)).toBe(NO_RECORD_DELAYS);
    expect(recordDelays([], 5_000)).toEqual({ ms: new Float64Array(0), maxMs: undefined });
  });

  it('keep one value per record of a full batch', () => {
    const records = Array.from({ length: 1_500 }, (_, index) => record(index, 10_000 + index));
    const delays = recordDelays(records, 20_000);
    expect(delays.ms.length).toBe(1_500);
    expect(delays.ms[0]).toBe(10_000);
    expect(delays.ms[1_499]).toBe(8_501);
    expect(delays.maxMs).toBe(10_000);
  });
});
