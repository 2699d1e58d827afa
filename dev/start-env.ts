/**
 * What `npm start` reads of its environment before it starts anything (scripts/start.ts): its
 * ports, and the two addresses its own banner prints for the CLI.
 */
import { connect } from 'node:net';
import { embeddedPostgresUrl } from './embedded-postgres.js';

/** A port from the environment: a whole number 0-65535 (0: a free one), else the default. */
export function portVariable(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) > 65_535)
    throw new Error(`${name} must be a port number (0 for a free one), got ${JSON.stringify(text)}`);
  return Number(text);
}

/** Whether something accepts connections on 127.0.0.1:`port` (within a second). */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, timeout: 1_000 });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/**
 * The banner's own values, exported for the CLI as it suggests, name this dev stack, not a
 * database or cluster of the operator's. While nothing listens there (npm start is not running),
 * they are removed from `env`, and said so: the next npm start starts its own again instead of
 * refusing the URL or waiting on a broker nobody runs. Returns whether DATABASE_URL is the
 * embedded server's (the dev-only SQL may then go into it: it is this stack's own).
 */
export async function forgetOwnAddresses(
  env: NodeJS.ProcessEnv,
  options: { readonly kafkaPort: number; readonly postgresPort: number; readonly say: (line: string) => void },
): Promise<{ ownDatabase: boolean }> {
  const { kafkaPort, postgresPort, say } = options;
  let ownDatabase = false;
  if (env.DATABASE_URL === embeddedPostgresUrl(postgresPort)) {
    ownDatabase = true;
    if (!(await listening(postgresPort))) {
      say('DATABASE_URL names the embedded PostgreSQL of npm start (as the banner prints it): starting that one');
      delete env.DATABASE_URL;
    }
  }
  if (env.KAFKA_BROKERS?.trim() === `127.0.0.1:${kafkaPort}` && !(await listening(kafkaPort))) {
    say(`KAFKA_BROKERS names the broker of npm start (127.0.0.1:${kafkaPort}, as the banner prints it): starting that one`);
    delete env.KAFKA_BROKERS;
  }
  return { ownDatabase };
}
