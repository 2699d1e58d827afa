/**
 * The host's HTTP endpoint fuzzed over a real socket: methods (Node's own and unknown ones),
 * percent-escapes (valid, malformed, not UTF-8), overlong and non-ASCII segments, trailing and
 * doubled slashes, query strings, with and without the control token. Behind it a host whose
 * every answer is full of connection details (crash messages with broker addresses, a stack
 * with a connection string, owners' addresses, a database user): no answer may carry one, every
 * answer has a JSON body (but a 200 of /metrics), none is a 500 with an exception's text.
 */
import { request } from 'node:http';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpEndpoint } from '../../../host/http-endpoint.js';
import type { HttpEndpoint } from '../../../host/http-endpoint.js';
import type { PipelinesTarget } from '../../../host/status-api.js';

const TOKEN = 'router-fuzz-token-0123456789';
/** What the host behind the endpoint knows and no answer may show. */
const PLANTED = ['127.0.0.1', '19711', '10.0.0.5', '10.0.0.77', 'fe80::', 'db.internal.example', 's3cret', 'svc_user'];
const ALLOWED_STATUS = new Set([200, 202, 400, 401, 403, 404, 405, 431, 503]);
const CRASH = 'KafkaJSConnectionError: connect ECONNREFUSED 127.0.0.1:19711';

const target: PipelinesTarget = {
  pipelines: ['reviews', 'app-stats'],
  summaries: () => [{ pipeline: 'reviews', state: `NOT_FETCHING (last: ${CRASH})`, paused: false }],
  async status(pipeline) {
    if (pipeline === 'app-stats') throw new Error('connect ECONNREFUSED [fe80::1]:9092 for user "svc_user"');
    return {
      pipeline,
      host_id: 'host-1:42',
      pause: { by: 'http:10.0.0.77', at: new Date(0), reason: null },
      partitions: [{ partition: 0, owner: { member_id: 'm-1', client_id: 'storage-consumer', host: '/10.0.0.5', this_host: true } }],
      last_error: {
        message: 'getaddrinfo ENOTFOUND db.internal.example',
        trace: 'Error: bad url postgres://svc_user:s3cret@db.internal.example:5432/app\n    at x (/app/a.js:1:2)',
      },
    };
  },
  async control(pipeline, paused, by) {
    if (pipeline === 'app-stats') throw Object.assign(new Error('password authentication failed for user "svc_user"'), { code: '28P01' });
    return { pause: { pipeline, paused, by, at: new Date(0), reason: null }, previous: undefined, audit: { id: '1' } };
  },
};

let endpoint: HttpEndpoint;
beforeAll(async () => {
  endpoint = await startHttpEndpoint({ port: 0, host: '127.0.0.1', controlToken: TOKEN }, new Registry(), () => ({
    state: () => 'Running',
    liveness: () => ({ alive: false, state: 'Running', maxAgeMs: 16_000, pipelines: {}, missing: [`reviews: stale (${CRASH})`] }),
    readiness: async () => ({
      ready: false,
      state: 'Running',
      pipelines: {},
      missing: [`app-stats: 3 consumer crashes since (last: ${CRASH})`],
    }),
    pipelinesApi: target,
  }));
});
afterAll(() => endpoint.close());

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** One request as given, the path byte for byte (Node sends Latin-1 characters raw). */
function send(method: string, path: string, headers: Record<string, string>, body: string | undefined): Promise<Answer> {
  // A body is framed by its length: unframed bytes after a GET would be a second, malformed request.
  const framed = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const options = { host: '127.0.0.1', port: endpoint.port, method, path, headers: framed, agent: false, timeout: 5_000 };
    const call = request(options, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: String(response.headers['content-type'] ?? ''),
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      response.on('error', reject);
    });
    call.on('timeout', () => call.destroy(new Error(`no answer to ${method} ${path.slice(0, 80)}`)));
    call.on('error', reject);
    call.end(body);
  });
}

/** What every answer must be. */
function assessAnswer(method: string, path: string, answer: Answer): void {
  const where = `${method} ${path.slice(0, 200)} -> ${answer.status} ${answer.body.slice(0, 300)}`;
  expect(ALLOWED_STATUS.has(answer.status), where).toBe(true);
  for (const planted of PLANTED) expect(answer.body, where).not.toContain(planted);
  expect(answer.body, where).not.toMatch(/\b(URIError|TypeError|RangeError|SyntaxError|ReferenceError)\b|\n\s+at /);
  if (path.split('?')[0] === '/metrics' && answer.status === 200) {
    expect(answer.contentType, where).toMatch(/^text\/plain/);
    return;
  }
  expect(answer.contentType, where).toMatch(/^application\/json/);
  if (method === 'HEAD') return;
  expect(() => JSON.parse(answer.body) as unknown, where).not.toThrow();
}

const word = fc.constantFrom(
  'pipelines',
  'reviews',
  'app-stats',
  'network-metrics',
  'status',
  'pause',
  'resume',
  'healthz',
  'readyz',
  'metrics',
  '',
);
const escape = fc.constantFrom('%', '%2', '%zz', '%G0', '%e0%80', '%ff', '%c3', '%C3%A9', '%2F', '%2f', '%00', '%25', '%7', '%%', '%u00e9');
const plain = fc.stringMatching(/^[A-Za-z0-9.~-]{0,8}$/);
const segment = fc.oneof(
  { weight: 5, arbitrary: word },
  { weight: 3, arbitrary: fc.array(fc.oneof(escape, plain, word), { minLength: 1, maxLength: 4 }).map((pieces) => pieces.join('')) },
  // Overlong: past Node's 16 KiB header limit too
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constantFrom('x', 'reviews', '%41'), fc.integer({ min: 200, max: 6_000 })).map(([piece, n]) => piece.repeat(n)),
  },
  // Non-ASCII, percent-encoded UTF-8
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).map((text) => encodeURIComponent(text)) },
  // Non-ASCII sent raw (Latin-1 bytes on the wire)
  {
    weight: 1,
    arbitrary: fc.string({
      unit: fc.integer({ min: 0xa0, max: 0xff }).map((code) => String.fromCharCode(code)),
      minLength: 1,
      maxLength: 6,
    }),
  },
);
const requestShape = fc.record({
  method: fc.constantFrom('GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND', 'BREW', 'get'),
  underPipelines: fc.boolean(),
  segments: fc.array(segment, { maxLength: 5 }),
  trailing: fc.constantFrom('', '/', '//', '/./', '/..'),
  doubled: fc.boolean(),
  query: fc.constantFrom('', '?', '?x=%', '?a=1&b=%zz', '#frag'),
  token: fc.constantFrom(undefined, TOKEN, 'wrong'),
  body: fc.constantFrom(undefined, '', '{"reason":"reindex"}', '{"reason":5}', 'not json', '[]', '{"reason":"10.0.0.1"}'),
});

describe('the HTTP router under fuzzing', () => {
  it('answers PUT /pipelines/%/pause with a 400 and a JSON body, token or not', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }] as Array<Record<string, string>>) {
      const answer = await send('PUT', '/pipelines/%/pause', headers, undefined);
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining('malformed path') });
    }
    const deep = await send('GET', '/pipelines/reviews/%e0%80/status', {}, undefined);
    expect(deep.status).toBe(400);
  });

  it('answers the status, readiness and control of a host full of addresses without any of them', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const answers = await Promise.all([
      send('GET', '/pipelines/reviews/status', {}, undefined),
      send('GET', '/pipelines/app-stats/status', {}, undefined),
      send('GET', '/pipelines', {}, undefined),
      send('GET', '/readyz', {}, undefined),
      send('GET', '/healthz', {}, undefined),
      send('PUT', '/pipelines/reviews/pause', auth, undefined),
      send('PUT', '/pipelines/app-stats/pause', auth, undefined),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 503, 200, 503, 503, 202, 503]);
    for (const answer of answers) assessAnswer('GET', '/', answer);
    expect(JSON.parse(answers[3]?.body ?? '')).toMatchObject({
      missing: ['app-stats: 3 consumer crashes since (last: KafkaJSConnectionError: connect ECONNREFUSED <address>)'],
    });
    expect(JSON.parse(answers[0]?.body ?? '')).toMatchObject({
      host_id: 'host-1:42',
      pause: { by: 'http:<address>' },
      partitions: [{ owner: { host: '/<address>' } }],
      last_error: { message: 'getaddrinfo ENOTFOUND <host>' },
    });
    expect(JSON.parse(answers[1]?.body ?? '')).toEqual({ error: 'the status could not be built: Error' });
    expect(JSON.parse(answers[6]?.body ?? '')).toMatchObject({ error: expect.stringContaining(': 28P01; nothing changed') });
  });

  it('gives every request an allowed status and a JSON body without addresses or exception texts', async () => {
    await fc.assert(
      fc.asyncProperty(requestShape, async (shape) => {
        const segments = shape.underPipelines ? ['pipelines', ...shape.segments] : shape.segments;
        const path = `/${segments.join(shape.doubled ? '//' : '/')}${shape.trailing}${shape.query}`;
        const headers: Record<string, string> = shape.token === undefined ? {} : { authorization: `Bearer ${shape.token}` };
        const answer = await send(shape.method, path, headers, shape.body);
        assessAnswer(shape.method, path, answer);
      }),
      { numRuns: 600 },
    );
  }, 120_000);
});
