import { describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.js';

/** `verify` with nothing reachable: every step fails, but the groups it checks are named first. */
async function verify(env: Record<string, string>, ...args: string[]) {
  let stdout = '';
  const code = await main(['verify', ...args], {
    stdout: (text) => void (stdout += text),
    stderr: () => undefined,
    env: { KAFKA_BROKERS: '127.0.0.1:1', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', ...env },
  });
  return { code, stdout };
}

describe('verify names the groups it checks', () => {
  it('the default groups by default, the stage names with --stage, a STORAGE_GROUP_<PIPELINE> variable over both', async () => {
    const plain = await verify({});
    const dev = await verify({}, '--stage', 'dev', '--json');
    const overridden = await verify({ STORAGE_GROUP_REVIEWS: 'storage-consumer.reviews' }, '--stage', 'dev');

    expect(plain.code).toBe(1);
    expect(plain.stdout.split('\n')[0]).toBe(
      'checking groups storage-consumer.app-stats, storage-consumer.reviews, storage-consumer.network-metrics (default)',
    );
    expect((JSON.parse(dev.stdout) as { groups: unknown }).groups).toEqual({
      'app-stats': { group: 'storage-consumer-dev.app-stats', from: '--stage dev' },
      reviews: { group: 'storage-consumer-dev.reviews', from: '--stage dev' },
      'network-metrics': { group: 'storage-consumer-dev.network-metrics', from: '--stage dev' },
    });
    expect(overridden.stdout.split('\n')[0]).toBe(
      'checking groups storage-consumer-dev.app-stats, storage-consumer-dev.network-metrics (--stage dev); ' +
        'storage-consumer.reviews (STORAGE_GROUP_REVIEWS)',
    );
  }, 60_000);
});
