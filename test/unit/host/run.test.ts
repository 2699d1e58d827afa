import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runHost } from '../../../host/run.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import { captureLogger } from '../../helpers/lambda-events.js';

// A stop signal at any moment of the start stops the host gracefully (issue 18): here the one
// moment a child process can hardly be made to hit on cue, while the HTTP endpoint binds.

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('runHost and a stop signal during the start', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('%s while the HTTP endpoint binds: exit 0, a log line, nothing started', async (signal) => {
    // Prepare: a broker nobody listens on; the host must never get that far
    const settings = loadHostSettings({
      KAFKA_BROKERS: '127.0.0.1:9',
      STORAGE_HTTP_PORT: String(await freePort()),
      STORAGE_HTTP_HOST: '127.0.0.1',
      STORAGE_HEARTBEAT_DIR: '/nonexistent/heartbeats',
    });
    const logger = captureLogger();
    const before = process.listenerCount(signal);

    // Act: the handlers are installed before runHost awaits anything; the signal comes in the bind
    const run = runHost(settings, { logger });
    expect(process.listenerCount(signal)).toBe(before + 1);
    process.emit(signal, signal);
    const code = await run;

    // Assess
    expect(code).toBe(0);
    expect(logger.lines.map((line) => line.message)).toEqual([
      'HTTP endpoint listening',
      'stop signal received while starting; nothing was in flight',
    ]);
    expect(logger.lines[1]?.extra).toMatchObject({ signal });
    expect(process.listenerCount(signal)).toBe(before);
  });
});
