/**
 * A password rotated under a warm container: the Secrets Manager source hands out the cached
 * (now wrong) credentials, PostgreSQL answers 28P01, the pipeline re-reads the secret once and
 * stores the batch. A tiny proxy in front of the test server plays the part of a server that has
 * already forgotten the old password (the machine's server may trust every local user).
 */
import { createServer, connect } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { secretDatabaseSource } from '../../aws/secret-database.js';
import type { SecretFetcher } from '../../aws/secret-database.js';
import { createPipelineHandler } from '../../invoke/batch-handler.js';
import { SAMPLE_APPLICATIONS, sampleEvents } from '../../scripts/generate-events.js';
import { SERVER_URL, createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { lambdaContext, testSettings } from '../helpers/lambda-events.js';

const ROTATED_AWAY_USER = 'storage_before_rotation';

/** One PostgreSQL ErrorResponse message (FATAL, the given SQLSTATE). */
function errorResponse(code: string, message: string): Buffer {
  const fields = Buffer.concat(
    [
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', code],
      ['M', message],
    ]
      .map(([type, value]) => Buffer.from(`${type}${value}\0`, 'utf8'))
      .concat(Buffer.from([0])),
  );
  const header = Buffer.alloc(5);
  header.write('E', 0, 'ascii');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

/** The `user` parameter of a startup message (length, protocol 3.0, then name\0value\0 pairs). */
function startupUser(packet: Buffer): string | undefined {
  const parts = packet.subarray(8).toString('utf8').split('\0');
  for (let index = 0; index + 1 < parts.length; index += 2) if (parts[index] === 'user') return parts[index + 1];
  return undefined;
}

/** Refuses the rotated-away user with 28P01; pipes everyone else to the real server. */
async function startAuthenticatingProxy(target: URL): Promise<{ server: Server; port: number; refused: () => number }> {
  let refused = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.once('data', (first) => {
      client.pause();
      if (startupUser(first) === ROTATED_AWAY_USER) {
        refused += 1;
        client.end(errorResponse('28P01', `password authentication failed for user "${ROTATED_AWAY_USER}"`));
        return;
      }
      const upstream = connect(Number(target.port || 5432), target.hostname, () => {
        upstream.write(first);
        client.pipe(upstream).pipe(client);
        client.resume();
      });
      sockets.add(upstream);
      upstream.once('close', () => sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
  });
  server.on('close', () => sockets.forEach((socket) => socket.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, refused: () => refused };
}

let schema: TestSchema;
let proxy: Awaited<ReturnType<typeof startAuthenticatingProxy>>;

beforeAll(async () => {
  schema = await createMigratedSchema([...SAMPLE_APPLICATIONS], 'rotation');
  proxy = await startAuthenticatingProxy(new URL(SERVER_URL));
});
afterAll(async () => {
  await new Promise<void>((resolve) => (proxy ? proxy.server.close(() => resolve()) : resolve()));
  await schema?.drop();
});

describe('database credentials from Secrets Manager after a rotation', () => {
  it('re-reads the secret once after 28P01 and stores the batch', async () => {
    const server = new URL(SERVER_URL);
    // The endpoint (and the test's schema) from DATABASE_URL; user and password from the secret.
    const endpoint = new URL(schema.url);
    endpoint.host = `127.0.0.1:${proxy.port}`;
    endpoint.username = '';
    const settings = testSettings(endpoint.toString());
    const fetchSecret = vi
      .fn<SecretFetcher>()
      .mockResolvedValueOnce({ username: ROTATED_AWAY_USER, password: 'before-rotation' })
      // The server's real password when it checks one (the embedded server); a trusting one takes any.
      .mockResolvedValue({
        username: decodeURIComponent(server.username),
        password: decodeURIComponent(server.password) || 'after-rotation',
      });
    const handler = createPipelineHandler('reviews', {
      settings,
      logger: new Logger({ serviceName: 'storage-consumer', logLevel: 'SILENT' }),
      database: secretDatabaseSource({ secretId: 'storage-consumer/test/database', base: settings.database, fetchSecret }),
    });
    try {
      const response = await handler(sampleEvents()['reviews'], lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(proxy.refused()).toBe(1);
      expect(fetchSecret.mock.calls.map(([, options]) => options)).toEqual([{ forceFetch: false }, { forceFetch: true }]);
      const { rows } = await schema.pool.query<{ count: string }>('SELECT count(*) FROM reviews');
      expect(Number(rows[0]?.count)).toBe(3);
    } finally {
      await handler.close();
    }
  });
});
