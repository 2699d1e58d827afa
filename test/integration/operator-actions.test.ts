import { hostname, userInfo } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOperatorActions, recordOperatorAction, resolveActor } from '../../shared/operator-actions.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';

let schema: TestSchema;
beforeAll(async () => {
  schema = await createMigratedSchema([], 'opactions');
});
afterAll(async () => {
  await schema.drop();
});

describe('the audit trail (operator_actions)', () => {
  it('resolves the actor from STORAGE_ACTOR, else the OS user and host', () => {
    expect(resolveActor({ STORAGE_ACTOR: ' ci-job-17 ' })).toBe('ci-job-17');
    expect(resolveActor({ STORAGE_ACTOR: '' })).toBe(`${userInfo().username}@${hostname()}`);
  });

  it('commits an entry with its transaction, and forgets it with a rollback', async () => {
    // Prepare
    const client = await schema.pool.connect();
    try {
      await client.query('BEGIN');
      await recordOperatorAction(client, {
        actor: 'a@h',
        command: 'dlq purge',
        arguments: { yes: true },
        outcome: { counts: { deleted: 9 } },
      });
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      const written = await recordOperatorAction(client, {
        actor: 'a@h',
        command: 'replay',
        arguments: { pipeline: 'reviews', to: 'earliest' },
        outcome: { partitions: [{ partition: 0, before: '17', after: '0' }] },
      });
      await client.query('COMMIT');

      // Act
      const listed = await listOperatorActions(schema.pool);
      const none = await listOperatorActions(schema.pool, { since: new Date(Date.now() + 60_000) });

      // Assess
      expect(listed).toEqual([
        {
          id: written.id,
          time: written.time,
          actor: 'a@h',
          command: 'replay',
          arguments: { pipeline: 'reviews', to: 'earliest' },
          outcome: { partitions: [{ partition: 0, before: '17', after: '0' }] },
          state: 'completed',
          completedAt: expect.any(Date),
        },
      ]);
      expect(written.time).toBeInstanceOf(Date);
      expect(none).toEqual([]);
    } finally {
      client.release();
    }
  });
});
