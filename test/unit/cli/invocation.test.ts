import { describe, expect, it } from 'vitest';
import { invocationOf } from '../../../cli/invocation.js';

describe('invocationOf: a printed command starts as the operator started this one', () => {
  const clone = '/home/ops/storage-consumer';

  it('is npx storage-consumer under npx (npm exec)', () => {
    expect(invocationOf({ npm_command: 'exec', PATH: '/usr/bin' }, `${clone}/bin/storage-consumer.js`, clone)).toBe('npx storage-consumer');
  });

  it('is storage-consumer when the program ran from a folder of the PATH', () => {
    expect(invocationOf({ PATH: '/usr/bin:/usr/local/bin' }, '/usr/local/bin/storage-consumer', '/tmp')).toBe('storage-consumer');
  });

  it('is node and the script, relative to the working folder below it, else absolute and quoted as the shell needs', () => {
    expect(invocationOf({ PATH: '/usr/bin' }, `${clone}/bin/storage-consumer.js`, clone)).toBe('node bin/storage-consumer.js');
    expect(invocationOf({ PATH: '/usr/bin' }, '/app/bin/storage-consumer.js', '/app')).toBe('node bin/storage-consumer.js');
    expect(invocationOf({ PATH: '/usr/bin' }, '/opt/my clone/bin/storage-consumer.js', '/tmp')).toBe(
      "node '/opt/my clone/bin/storage-consumer.js'",
    );
    // A storage-consumer that is not on the PATH cannot be started by its name alone.
    expect(invocationOf({ PATH: '/usr/bin' }, `${clone}/node_modules/.bin/storage-consumer`, clone)).toBe(
      'node node_modules/.bin/storage-consumer',
    );
  });
});
