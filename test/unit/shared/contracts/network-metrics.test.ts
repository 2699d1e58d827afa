import { describe, expect, it } from 'vitest';
import { decodeNetworkMetrics } from '../../../../shared/contracts/network-metrics.js';
import { recordValue, sampleNetworkMetrics } from '../../../helpers/messages.js';

function decodeWith(changes: Record<string, unknown>): ReturnType<typeof decodeNetworkMetrics> {
  return decodeNetworkMetrics(recordValue({ ...sampleNetworkMetrics(), ...changes }));
}

function detailWith(changes: Record<string, unknown>): string {
  const result = decodeWith(changes);
  return result.ok ? 'ok' : `${result.rejection.reason}: ${result.rejection.detail}`;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const REQUIRED = ['analysis_id', 'package_name', 'captured_at', 'duration_ms', 'packet_count', 'bytes_sent', 'bytes_received'];
const OPTIONAL = ['tcp_connections', 'dns_queries', 'unique_hosts', 'avg_rtt_ms', 'retransmission_rate', 'protocols', 'analyzer_version'];

describe('network-metrics contract', () => {
  it('decodes the docs/design.md appendix message', () => {
    expect(decodeNetworkMetrics(recordValue(sampleNetworkMetrics()))).toEqual({
      ok: true,
      message: { ...sampleNetworkMetrics(), captured_at: '2026-11-30T09:15:00.000000+00:00' },
    });
  });

  it.each(REQUIRED)('%s missing or null is "required"', (field) => {
    const message = sampleNetworkMetrics();
    delete message[field];
    const missing = decodeNetworkMetrics(recordValue(message));
    expect(missing.ok || missing.rejection).toEqual({ reason: 'invalid_message', detail: `${field}: required` });
    expect(detailWith({ [field]: null })).toBe(`invalid_message: ${field}: required`);
  });

  it.each(OPTIONAL)('%s absent or null is null', (field) => {
    const message = sampleNetworkMetrics();
    delete message[field];
    const absent = decodeNetworkMetrics(recordValue(message));
    expect(absent.ok && absent.message[field as keyof typeof absent.message]).toBeNull();
    const nulled = decodeWith({ [field]: null });
    expect(nulled.ok && nulled.message[field as keyof typeof nulled.message]).toBeNull();
  });

  it('analysis_id: a UUID of any version, written in lower case', () => {
    const upper = decodeWith({ analysis_id: '9B2F6A0E-3C4D-4E5F-8A9B-0C1D2E3F4A5B' });
    expect(upper.ok && upper.message.analysis_id).toBe('9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b');
    for (const bad of ['9b2f6a0e3c4d4e5f8a9b0c1d2e3f4a5b', 'not-a-uuid', 42]) {
      expect(detailWith({ analysis_id: bad })).toBe('invalid_message: analysis_id: must be a UUID (8-4-4-4-12 hexadecimal digits)');
    }
  });

  it.each(['duration_ms', 'tcp_connections', 'dns_queries', 'unique_hosts'])('%s: integer 0..2147483647', (field) => {
    const rule = `invalid_message: ${field}: must be an integer between 0 and 2147483647`;
    expect(detailWith({ [field]: 0 })).toBe('ok');
    expect(detailWith({ [field]: 2147483647 })).toBe('ok');
    for (const bad of [-1, 2147483648, 1.5, '60000', true]) expect(detailWith({ [field]: bad })).toBe(rule);
  });

  it.each(['packet_count', 'bytes_sent', 'bytes_received'])('%s: integer 0..2^53-1', (field) => {
    const rule = `invalid_message: ${field}: must be an integer between 0 and ${MAX_SAFE}`;
    expect(detailWith({ [field]: MAX_SAFE })).toBe('ok');
    for (const bad of [-1, 2 ** 53, 0.25, '1']) expect(detailWith({ [field]: bad })).toBe(rule);
  });

  it('avg_rtt_ms >= 0 and retransmission_rate 0..1, finite numbers', () => {
    expect(detailWith({ avg_rtt_ms: 0, retransmission_rate: 0 })).toBe('ok');
    expect(detailWith({ avg_rtt_ms: 1e6, retransmission_rate: 1 })).toBe('ok');
    expect(detailWith({ avg_rtt_ms: -0.1 })).toBe('invalid_message: avg_rtt_ms: must be a number >= 0');
    expect(detailWith({ retransmission_rate: 1.0001 })).toBe('invalid_message: retransmission_rate: must be a number between 0 and 1');
    const infinite = Buffer.from(JSON.stringify(sampleNetworkMetrics()).replace('"avg_rtt_ms":38.2', '"avg_rtt_ms":1e999'));
    const result = decodeNetworkMetrics(infinite);
    expect(result.ok || result.rejection.detail).toBe('avg_rtt_ms: must be a number >= 0');
  });

  it('protocols: name 1..64 characters -> integer >= 0', () => {
    expect(detailWith({ protocols: {} })).toBe('ok');
    expect(detailWith({ protocols: { ['p'.repeat(64)]: 0 } })).toBe('ok');
    expect(detailWith({ protocols: { ['p'.repeat(65)]: 1 } })).toBe(
      `invalid_message: protocols["${'p'.repeat(40)}"]: protocol name must be 1 to 64 characters`,
    );
    expect(detailWith({ protocols: { '': 1 } })).toBe('invalid_message: protocols[""]: protocol name must be 1 to 64 characters');
    expect(detailWith({ protocols: { tls: -1 } })).toBe(`invalid_message: protocols.tls: must be an integer between 0 and ${MAX_SAFE}`);
    expect(detailWith({ protocols: { 'http/2': 1.5 } })).toBe(
      `invalid_message: protocols["http/2"]: must be an integer between 0 and ${MAX_SAFE}`,
    );
    expect(detailWith({ protocols: ['tls'] })).toBe('invalid_message: protocols: must be an object of protocol name -> integer >= 0');
  });

  it('analyzer_version: at most 64 characters', () => {
    expect(detailWith({ analyzer_version: '1'.repeat(64) })).toBe('ok');
    expect(detailWith({ analyzer_version: '1'.repeat(65) })).toBe(
      'invalid_message: analyzer_version: must be a string of at most 64 characters',
    );
  });

  it('ignores unknown extra fields', () => {
    const result = decodeWith({ pcap_path: '/tmp/x.pcap', extra: { nested: true } });
    expect(result.ok && Object.keys(result.message)).toEqual(Object.keys(sampleNetworkMetrics()));
  });

  it('rejects a camelCase message', () => {
    const camel = {
      analysisId: '9b2f6a0e-3c4d-4e5f-8a9b-0c1d2e3f4a5b',
      packageName: 'com.example.weather',
      capturedAt: '2026-11-30T09:15:00Z',
      durationMs: 60000,
      packetCount: 8412,
      bytesSent: 412330,
      bytesReceived: 5120987,
    };
    const result = decodeNetworkMetrics(recordValue(camel));
    expect(result.ok || result.rejection).toEqual({
      reason: 'invalid_message',
      detail: 'analysis_id: required (+6 more)',
      violations: {
        total: 7,
        kept: ['analysis_id', 'package_name', 'captured_at', 'duration_ms', 'packet_count', 'bytes_sent', 'bytes_received'].map(
          (field) => `${field}: required`,
        ),
      },
    });
  });
});

describe('contract violations kept in a dead letter', () => {
  it('keeps the first 20 violations, counts them all, and names the first in the detail', () => {
    // 30 protocol counts, each negative: 30 violations
    const protocols = Object.fromEntries(Array.from({ length: 30 }, (_, index) => [`p${index}`, -1]));
    const result = decodeNetworkMetrics(recordValue({ ...sampleNetworkMetrics(), protocols }));
    if (result.ok) throw new Error('expected a rejection');
    expect(result.rejection.reason).toBe('invalid_message');
    expect(result.rejection.violations?.total).toBe(30);
    expect(result.rejection.violations?.kept).toHaveLength(20);
    expect(result.rejection.violations?.kept[0]).toMatch(/^protocols\.p0: /);
    expect(result.rejection.violations?.kept[19]).toMatch(/^protocols\.p19: /);
    expect(result.rejection.detail).toBe(`${result.rejection.violations?.kept[0]} (+29 more)`);
  });
});
