import { describe, expect, it } from 'vitest';
import { checkConsumerTimeout } from '../../../deploy/resources.js';

describe('packaging: the consumer timeout holds one database attempt', () => {
  it('accepts the default 120 s, and refuses a timeout below one attempt plus the reserve, naming both numbers', async () => {
    await expect(checkConsumerTimeout({ timeoutSeconds: 120, environment: {} })).resolves.toBeUndefined();
    // Defaults: 5 s connect + 30 s statement + 1 s margin + 1 s hand-back = 37 s
    await expect(checkConsumerTimeout({ timeoutSeconds: 30, environment: {} })).rejects.toThrow(
      "the consumer functions' timeout (30 s = 30000 ms) cannot hold one database attempt plus the reserve (37000 ms",
    );
    await expect(
      checkConsumerTimeout({ timeoutSeconds: 30, environment: { STORAGE_DB_STATEMENT_TIMEOUT_MS: '10000' } }),
    ).resolves.toBeUndefined();
    // tsx compiles shared/settings.ts on first use: slow on a busy machine
  }, 60_000);
});
