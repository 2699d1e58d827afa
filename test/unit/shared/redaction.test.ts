import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it, vi } from 'vitest';
import { errorCode, redactAnswer, redactConnectionDetails, redactErrorText } from '../../../shared/redaction.js';
import { loggedError } from '../../../shared/errors.js';

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

describe('redactErrorText (the loggers of the host, the batch handler and the migration)', () => {
  it("takes addresses out of a log line's error text and leaves every other field alone", () => {
    // Prepare: what a Powertools logger with this replacer writes for a failed pipeline
    const printed: string[] = [];
    // Powertools writes through a Console of its own on the process's streams.
    const capture = (chunk: unknown) => (printed.push(String(chunk)), true);
    const spies = [
      vi.spyOn(process.stdout, 'write').mockImplementation(capture),
      vi.spyOn(process.stderr, 'write').mockImplementation(capture),
    ];
    const logger = new Logger({ serviceName: 'storage-consumer', jsonReplacerFn: redactErrorText });
    const error = new Error('connect ECONNREFUSED 127.0.0.1:19711');

    // Act
    try {
      logger.error('pipeline failed', {
        pipeline: 'reviews',
        topic: 'reviews',
        broker: 'b-1:9092',
        error,
        causes: ['reviews: connect ECONNREFUSED 10.0.0.7:5432'],
      });
    } finally {
      for (const spy of spies) spy.mockRestore();
    }

    // Assess
    const line = JSON.parse(printed[0] ?? '{}') as Record<string, unknown> & { error: { message: string; stack: string } };
    expect(line.error.message).toBe('connect ECONNREFUSED <address>');
    expect(line.error.stack).not.toContain('127.0.0.1');
    expect(line.causes).toEqual(['reviews: connect ECONNREFUSED <address>']);
    expect(line).toMatchObject({ message: 'pipeline failed', pipeline: 'reviews', topic: 'reviews', broker: 'b-1:9092' });
  });
});

describe('loggedError: an error as log line fields', () => {
  it('keeps the text in error and adds the stack and the causes, all redacted by the lines replacer', () => {
    // Prepare
    const driver = Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
    const outer = new Error('batch not stored', { cause: new Error('attempt failed', { cause: driver }) });

    // Act
    const fields = loggedError(outer);
    const line = JSON.parse(JSON.stringify({ message: 'x', ...fields }, redactErrorText)) as Record<string, unknown>;

    // Assess
    expect(fields.error).toBe('Error: batch not stored');
    expect(fields.stack).toMatch(/^Error: batch not stored\n\s+at /);
    expect(fields.causes).toEqual(['Error: attempt failed', 'Error: connect ECONNREFUSED 10.0.0.5:5432']);
    expect(line.causes).toEqual(['Error: attempt failed', 'Error: connect ECONNREFUSED <address>']);
    expect(loggedError('plain text')).toEqual({ error: 'plain text' });
    expect(loggedError(new Error('alone'))).not.toHaveProperty('causes');
  });
});
