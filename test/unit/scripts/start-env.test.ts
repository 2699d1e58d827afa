import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { embeddedPostgresUrl } from '../../../dev/embedded-postgres.js';
import { forgetOwnAddresses, portVariable } from '../../../dev/start-env.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('npm start and the addresses its banner prints', () => {
  it('takes the exported banner values as its own while nothing listens there: it starts them again', async () => {
    const [kafkaPort, postgresPort] = [await freePort(), await freePort()];
    const env: NodeJS.ProcessEnv = { DATABASE_URL: embeddedPostgresUrl(postgresPort), KAFKA_BROKERS: `127.0.0.1:${kafkaPort}` };
    const said: string[] = [];

    const result = await forgetOwnAddresses(env, { kafkaPort, postgresPort, say: (line) => said.push(line) });

    expect(result.ownDatabase).toBe(true);
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.KAFKA_BROKERS).toBeUndefined();
    expect(said).toEqual([
      'DATABASE_URL names the embedded PostgreSQL of npm start (as the banner prints it): starting that one',
      `KAFKA_BROKERS names the broker of npm start (127.0.0.1:${kafkaPort}, as the banner prints it): starting that one`,
    ]);
  });

  it('keeps a broker that answers, and any other database URL (which npm start then refuses)', async () => {
    const broker = createServer();
    await new Promise<void>((resolve) => broker.listen(0, '127.0.0.1', resolve));
    try {
      const kafkaPort = (broker.address() as AddressInfo).port;
      const env: NodeJS.ProcessEnv = { DATABASE_URL: 'postgres://app@db.example:5432/prod', KAFKA_BROKERS: `127.0.0.1:${kafkaPort}` };

      const result = await forgetOwnAddresses(env, { kafkaPort, postgresPort: 54329, say: () => undefined });

      expect(result.ownDatabase).toBe(false);
      expect(env.DATABASE_URL).toBe('postgres://app@db.example:5432/prod');
      expect(env.KAFKA_BROKERS).toBe(`127.0.0.1:${kafkaPort}`);
    } finally {
      broker.close();
    }
  });

  it('reads KAFKA_CONTROLLER_PORT and the other ports, refusing what is not a port', () => {
    expect(portVariable({}, 'KAFKA_CONTROLLER_PORT', 0)).toBe(0);
    expect(portVariable({ KAFKA_CONTROLLER_PORT: '9093' }, 'KAFKA_CONTROLLER_PORT', 0)).toBe(9093);
    expect(() => portVariable({ KAFKA_CONTROLLER_PORT: 'abc' }, 'KAFKA_CONTROLLER_PORT', 0)).toThrow(
      'KAFKA_CONTROLLER_PORT must be a port number (0 for a free one), got "abc"',
    );
    expect(() => portVariable({ KAFKA_PORT: '70000' }, 'KAFKA_PORT', 9092)).toThrow('KAFKA_PORT must be a port number');
  });
});
