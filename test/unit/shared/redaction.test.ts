import { describe, expect, it } from 'vitest';
import { errorCode, redactAnswer, redactConnectionDetails } from '../../../shared/redaction.js';

describe('redactConnectionDetails', () => {
  it.each([
    ['KafkaJSConnectionError: connect ECONNREFUSED 127.0.0.1:19711', 'KafkaJSConnectionError: connect ECONNREFUSED <address>'],
    ['connect ECONNREFUSED ::1:5432', 'connect ECONNREFUSED <address>'],
    ['connect ECONNREFUSED [::1]:5432', 'connect ECONNREFUSED <address>'],
    ['connect EHOSTUNREACH fe80::1ff:fe23:4567:890a', 'connect EHOSTUNREACH <address>'],
    ['connect ETIMEDOUT 2001:0db8:0000:0000:0000:ff00:0042:8329', 'connect ETIMEDOUT <address>'],
    ['connect ETIMEDOUT kafka-1.internal.example:9092', 'connect ETIMEDOUT <address>'],
    ['Connection error: connect ECONNREFUSED localhost:5432', 'Connection error: connect ECONNREFUSED <address>'],
    ['getaddrinfo ENOTFOUND db.internal.example', 'getaddrinfo ENOTFOUND <host>'],
    ['getaddrinfo EAI_AGAIN kafka-2', 'getaddrinfo EAI_AGAIN <host>'],
    ['bad url postgres://svc:s3cret@db:5432/app then', 'bad url <url> then'],
    ['password authentication failed for user "svc"', 'password authentication failed for user <user>'],
    [
      'no pg_hba.conf entry for host "10.1.2.3", user "svc", database "app", SSL off',
      'no pg_hba.conf entry for host "<address>", user <user>, database "app", SSL off',
    ],
    ['role "svc" does not exist', 'role <user> does not exist'],
    ['host=db.internal user=svc password=s3cret dbname=app', 'host=<redacted> user=<redacted> password=<redacted> dbname=app'],
    [
      "Hostname/IP does not match certificate's altnames: Host: db.example. is not in the cert's altnames: DNS:other.example",
      "Hostname/IP does not match certificate's altnames: Host: <host> is not in the cert's altnames: DNS: <host>",
    ],
    ['client /10.0.0.5', 'client /<address>'],
  ])('%s', (text, redacted) => {
    expect(redactConnectionDetails(text)).toBe(redacted);
  });

  it('keeps what is no address: stack frames, times, offsets, host ids, pipeline causes', () => {
    const kept = [
      '    at Object.<anonymous> (/app/dist/host/main.js:123:45)',
      '    at async file:///app/dist/host/supervisor.js:88:7',
      'started at 2026-12-01T12:00:05.123Z, offset 1234567890',
      'host-1:4242',
      'app-stats: no fetch completed for 4 s, 3 consumer crashes since (last: KafkaJSProtocolError: This server does not host this topic-partition)',
      'reviews: heartbeat 17000 ms old (limit 16000 ms; RUNNING)',
      'host: Starting',
    ];
    for (const text of kept) expect(redactConnectionDetails(text)).toBe(text);
  });
});

describe('redactAnswer', () => {
  it('redacts every string, nested, keys too; keeps numbers, booleans, null; takes dates as JSON does', () => {
    const at = new Date('2026-12-01T12:00:00Z');
    const answer = redactAnswer({
      missing: ['reviews: 2 consumer crashes since (last: connect ECONNREFUSED 10.0.0.5:9092)'],
      nested: { deeper: [{ by: 'http:192.168.1.20', at, n: 5, ok: true, none: null }] },
      '10.0.0.9': 'key',
    });
    expect(answer).toEqual({
      missing: ['reviews: 2 consumer crashes since (last: connect ECONNREFUSED <address>)'],
      nested: { deeper: [{ by: 'http:<address>', at: '2026-12-01T12:00:00.000Z', n: 5, ok: true, none: null }] },
      '<address>': 'key',
    });
  });
});

describe('errorCode', () => {
  it('gives the code, else the name, never the message', () => {
    expect(errorCode(Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:5432'), { code: 'ECONNREFUSED' }))).toBe('ECONNREFUSED');
    expect(errorCode(Object.assign(new Error('x'), { code: '57P03' }))).toBe('57P03');
    expect(errorCode(Object.assign(new Error('x'), { code: 'not a code 10.0.0.1' }))).toBe('Error');
    expect(errorCode(new TypeError('at 10.0.0.1'))).toBe('TypeError');
    expect(errorCode('10.0.0.1')).toBe('unknown error');
  });
});
