import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EventPartition } from '../../../host/event-cut.js';
import { decideOffsets } from '../../../host/offsets.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import type { HostSettings } from '../../../config/host-settings.js';
import type { HandlerOutcome, OffsetDecision } from '../../../host/offsets.js';
import { ConfigurationError, RetryBudgetExhaustedError } from '../../../shared/errors.js';

function partition(topic: string, number: number, offsets: readonly number[], next?: string): EventPartition {
  return {
    topic,
    partition: number,
    key: `${topic}-${number}`,
    offsets: offsets.map(String),
    next: next ?? String((offsets.at(-1) as number) + 1),
  };
}

const response = (payload: unknown): HandlerOutcome => ({ kind: 'response', payload });
const failure = (key: string, offset: unknown) => ({ itemIdentifier: { partition: key, offset } });

// Two partitions, with a gap in p1 (a compacted or transactional log).
const p0 = partition('reviews', 0, [10, 11, 12, 13]);
const p1 = partition('reviews', 1, [100, 101, 103, 104]);
const event = [p0, p1];

const success: OffsetDecision = {
  outcome: 'success',
  commit: [
    { topic: 'reviews', partition: 0, offset: '14' },
    { topic: 'reviews', partition: 1, offset: '105' },
  ],
  redeliver: [],
  reportedWithoutSwitch: 0,
};

const wholeBatchFailed = (reason: RegExp) => ({
  outcome: 'failed',
  commit: [],
  redeliver: [
    { topic: 'reviews', partition: 0, offset: '10' },
    { topic: 'reviews', partition: 1, offset: '100' },
  ],
  reason: expect.stringMatching(reason),
  reportedWithoutSwitch: 0,
});

describe('decideOffsets: success', () => {
  it.each([
    ['null', null],
    ['undefined', undefined],
    ['an empty object', {}],
    ['batchItemFailures null', { batchItemFailures: null }],
    ['batchItemFailures empty', { batchItemFailures: [] }],
    ['extra fields only', { ok: true }],
  ])('commits lastOffset + 1 everywhere for %s', (_name, payload) => {
    // Act
    const decision = decideOffsets(event, response(payload), true);

    // Assess
    expect(decision).toEqual(success);
  });

  it('commits past trailing control records when the partition says so', () => {
    // Prepare: the fetch ended at 20 although the last message is 13 (a transaction marker follows)
    const withMarker = partition('reviews', 0, [10, 11, 12, 13], '21');

    // Act
    const decision = decideOffsets([withMarker], response({ batchItemFailures: [] }), true);

    // Assess
    expect(decision.commit).toEqual([{ topic: 'reviews', partition: 0, offset: '21' }]);
  });

  it('never rounds offsets beyond 2^53 (BigInt arithmetic on strings)', () => {
    // Prepare
    const huge: EventPartition = {
      topic: 't',
      partition: 0,
      key: 't-0',
      offsets: ['9007199254740993', '9007199254740995'],
      next: '9007199254740996',
    };

    // Act
    const partial = decideOffsets([huge], response({ batchItemFailures: [failure('t-0', '9007199254740995')] }), true);

    // Assess
    expect(partial.commit).toEqual([{ topic: 't', partition: 0, offset: '9007199254740995' }]);
    expect(partial.redeliver).toEqual([{ topic: 't', partition: 0, offset: '9007199254740995' }]);
  });
});

describe('decideOffsets: batchItemFailures (switch on)', () => {
  it('commits a listed partition up to its failed offset and redelivers from it; unlisted ones commit in full', () => {
    // Act
    const decision = decideOffsets(event, response({ batchItemFailures: [failure('reviews-1', 103)] }), true);

    // Assess
    expect(decision).toEqual({
      outcome: 'partial',
      commit: [
        { topic: 'reviews', partition: 0, offset: '14' },
        { topic: 'reviews', partition: 1, offset: '103' },
      ],
      redeliver: [{ topic: 'reviews', partition: 1, offset: '103' }],
      reportedWithoutSwitch: 0,
    });
  });

  it('uses the lowest failed offset when a partition is listed several times, in any order', () => {
    // Act
    const decision = decideOffsets(
      event,
      response({ batchItemFailures: [failure('reviews-0', 13), failure('reviews-0', 11), failure('reviews-0', 12)] }),
      true,
    );

    // Assess
    expect(decision.commit).toContainEqual({ topic: 'reviews', partition: 0, offset: '11' });
    expect(decision.redeliver).toEqual([{ topic: 'reviews', partition: 0, offset: '11' }]);
  });

  it('commits nothing for a partition whose first offset failed (the handler\'s "report" form)', () => {
    // Act
    const decision = decideOffsets(event, response({ batchItemFailures: [failure('reviews-0', 10), failure('reviews-1', 100)] }), true);

    // Assess
    expect(decision).toEqual({
      outcome: 'partial',
      commit: [],
      redeliver: [
        { topic: 'reviews', partition: 0, offset: '10' },
        { topic: 'reviews', partition: 1, offset: '100' },
      ],
      reportedWithoutSwitch: 0,
    });
  });

  it('accepts an offset given as a decimal string', () => {
    // Act
    const decision = decideOffsets(event, response({ batchItemFailures: [failure('reviews-0', '12')] }), true);

    // Assess
    expect(decision.redeliver).toEqual([{ topic: 'reviews', partition: 0, offset: '12' }]);
  });

  it.each([
    ['a partition that is not in the event', failure('reviews-2', 10)],
    ['another topic', failure('app-stats-0', 10)],
    ['an offset before the event', failure('reviews-0', 9)],
    ['an offset after the event', failure('reviews-0', 14)],
    ['an offset in a gap of the event', failure('reviews-1', 102)],
    ['a negative offset', failure('reviews-0', -1)],
    ['a fractional offset', failure('reviews-0', 10.5)],
    ['an unsafe integer offset', failure('reviews-0', 2 ** 53 + 2)],
    ['a non-numeric offset', failure('reviews-0', 'ten')],
    ['a missing offset', { itemIdentifier: { partition: 'reviews-0' } }],
    ['a numeric partition', { itemIdentifier: { partition: 0, offset: 10 } }],
    ['a missing itemIdentifier', { partition: 'reviews-0', offset: 10 }],
    ['a string itemIdentifier', { itemIdentifier: 'reviews-0:10' }],
    ['a null item', null],
  ])('treats the whole batch as failed for an identifier naming %s', (_name, item) => {
    // Act: one valid failure plus the bad one; the valid one must not lead to a partial commit
    const decision = decideOffsets(event, response({ batchItemFailures: [failure('reviews-1', 104), item] }), true);

    // Assess
    expect(decision).toEqual(wholeBatchFailed(/itemIdentifier/));
  });

  it.each([
    ['a string', 'ok'],
    ['a number', 42],
    ['an array', [{ itemIdentifier: { partition: 'reviews-0', offset: 10 } }]],
    ['true', true],
  ])('treats the whole batch as failed when the response is %s', (_name, payload) => {
    expect(decideOffsets(event, response(payload), true)).toEqual(wholeBatchFailed(/not an object/));
  });

  it('treats the whole batch as failed when batchItemFailures is not an array', () => {
    expect(decideOffsets(event, response({ batchItemFailures: { partition: 'reviews-0' } }), true)).toEqual(
      wholeBatchFailed(/not an array/),
    );
  });

  it('treats the whole batch as failed when the response is not JSON', () => {
    expect(decideOffsets(event, { kind: 'invalid-response', detail: 'Unexpected token' }, true)).toEqual(
      wholeBatchFailed(/invalid response: Unexpected token/),
    );
  });
});

describe('decideOffsets: switch off (no ReportBatchItemFailures on the mapping)', () => {
  it('still honours a failure report (AWS would lose the batch) and says how many entries it had', () => {
    // Act
    const decision = decideOffsets(event, response({ batchItemFailures: [failure('reviews-0', 12), failure('reviews-1', 100)] }), false);

    // Assess: p0 commits up to 12 and is redelivered from it; p1 commits nothing
    expect(decision).toEqual({
      outcome: 'partial',
      commit: [{ topic: 'reviews', partition: 0, offset: '12' }],
      redeliver: [
        { topic: 'reviews', partition: 0, offset: '12' },
        { topic: 'reviews', partition: 1, offset: '100' },
      ],
      reportedWithoutSwitch: 2,
    });
  });

  it.each([
    ['an identifier that is not in the event', { batchItemFailures: [failure('nope-9', 1)] }, /not in the event/],
    ['a non-array batchItemFailures', { batchItemFailures: 'x' }, /not an array/],
  ])('treats the whole batch as failed for %s', (_name, payload, reason) => {
    expect(decideOffsets(event, response(payload), false)).toEqual({ ...wholeBatchFailed(reason), reportedWithoutSwitch: 1 });
  });

  it.each([
    ['a string response', 'ok'],
    ['an empty report', { batchItemFailures: [] }],
    ['a null report', { batchItemFailures: null }],
  ])('counts a response without a failure report as success, as AWS does: %s', (_name, payload) => {
    expect(decideOffsets(event, response(payload), false)).toEqual(success);
  });

  it('counts a response that is not JSON as success, as AWS does', () => {
    expect(decideOffsets(event, { kind: 'invalid-response', detail: 'x' }, false)).toEqual(success);
  });

  it('still redelivers after a function error', () => {
    expect(decideOffsets(event, { kind: 'error', error: new Error('boom') }, false)).toEqual(wholeBatchFailed(/boom/));
  });
});

describe('decideOffsets: errors', () => {
  it.each([
    ['an Error', new RetryBudgetExhaustedError('database still failing'), /RetryBudgetExhaustedError: database still failing/],
    ['a thrown string', 'oops', /oops/],
    ['undefined', undefined, /undefined/],
  ])('commits nothing and redelivers every partition from its first offset after %s', (_name, error, reason) => {
    expect(decideOffsets(event, { kind: 'error', error }, true)).toEqual(wholeBatchFailed(reason));
  });
});

describe('decideOffsets: properties', () => {
  // An event: up to 3 partitions, each with ascending offsets (gaps allowed).
  const eventArbitrary = fc.uniqueArray(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 3 }).chain((numbers) =>
    fc.tuple(
      ...numbers.map((number) =>
        fc.uniqueArray(fc.integer({ min: 0, max: 1_000 }), { minLength: 1, maxLength: 8 }).map((offsets) =>
          partition(
            't',
            number,
            [...offsets].sort((a, b) => a - b),
          ),
        ),
      ),
    ),
  );

  it('never commits past a reported failure, and redelivers exactly from the lowest one', () => {
    fc.assert(
      fc.property(
        eventArbitrary.chain((partitions) =>
          fc.tuple(
            fc.constant(partitions),
            fc.array(
              fc.constantFrom(...partitions).chain((p) => fc.constantFrom(...p.offsets).map((offset) => ({ p, offset: Number(offset) }))),
              { maxLength: 6 },
            ),
          ),
        ),
        ([partitions, failed]) => {
          // Act
          const decision = decideOffsets(
            partitions,
            response({ batchItemFailures: failed.map(({ p, offset }) => failure(p.key, offset)) }),
            true,
          );

          // Assess
          for (const p of partitions) {
            const lowest = failed
              .filter((f) => f.p === p)
              .map((f) => f.offset)
              .sort((a, b) => a - b)[0];
            const committed = decision.commit.find((c) => c.partition === p.partition)?.offset;
            const redelivered = decision.redeliver.find((r) => r.partition === p.partition)?.offset;
            if (lowest === undefined) {
              expect(committed).toBe(p.next);
              expect(redelivered).toBeUndefined();
            } else {
              expect(redelivered).toBe(String(lowest));
              if (committed !== undefined) expect(BigInt(committed)).toBeLessThanOrEqual(BigInt(lowest));
              expect(committed === undefined).toBe(String(lowest) === p.offsets[0]);
            }
          }
        },
      ),
    );
  });

  it('either commits or redelivers every partition of the event, never both past each other', () => {
    fc.assert(
      fc.property(eventArbitrary, fc.anything(), fc.boolean(), (partitions, payload, reportSwitch) => {
        // Act
        const decision = decideOffsets(partitions, response(payload), reportSwitch);

        // Assess
        for (const p of partitions) {
          const committed = decision.commit.find((c) => c.partition === p.partition);
          const redelivered = decision.redeliver.find((r) => r.partition === p.partition);
          expect(committed !== undefined || redelivered !== undefined).toBe(true);
          if (committed && redelivered) expect(committed.offset).toBe(redelivered.offset);
          if (committed) expect(BigInt(committed.offset)).toBeLessThanOrEqual(BigInt(p.next));
        }
      }),
    );
  });
});

describe('no host setting lets a failure report advance past the failed records', () => {
  const modes = [
    ['in-process', {}],
    [
      'lambda',
      {
        STORAGE_INVOKE_MODE: 'lambda',
        AWS_REGION: 'eu-west-1',
        STORAGE_PIPELINES: 'reviews',
        STORAGE_LAMBDA_FUNCTION_REVIEWS: 'storage-consumer-dev-reviews',
      },
    ],
  ] as const;
  const responses = [
    ['unset', {}],
    ['throw', { STORAGE_FAILURE_RESPONSE: 'throw' }],
    ['report', { STORAGE_FAILURE_RESPONSE: 'report' }],
  ] as const;
  const switches = [
    ['unset', {}],
    ['true', { STORAGE_REPORT_BATCH_ITEM_FAILURES: 'true' }],
    ['false', { STORAGE_REPORT_BATCH_ITEM_FAILURES: 'false' }],
  ] as const;
  const combinations = modes.flatMap(([mode, modeEnv]) =>
    responses.flatMap(([form, formEnv]) =>
      switches.map(
        ([on, switchEnv]) => [mode, form, on, { KAFKA_BROKERS: '127.0.0.1:9092', ...modeEnv, ...formEnv, ...switchEnv }] as const,
      ),
    ),
  );

  it.each(combinations)(
    'STORAGE_INVOKE_MODE=%s STORAGE_FAILURE_RESPONSE=%s STORAGE_REPORT_BATCH_ITEM_FAILURES=%s: refused at start, or the report is honoured',
    (_mode, _form, _on, env) => {
      // Prepare: the report a handler answers when the retry budget ran out (its lowest offset per partition)
      let settings: HostSettings;
      try {
        settings = loadHostSettings(env);
      } catch (error) {
        // Refusing to start is one of the two allowed answers; it must name the variables
        expect(error).toBeInstanceOf(ConfigurationError);
        expect((error as Error).message).toMatch(/STORAGE_FAILURE_RESPONSE=report needs STORAGE_REPORT_BATCH_ITEM_FAILURES=true/);
        return;
      }
      const report = response({ batchItemFailures: [failure('reviews-0', 10), failure('reviews-1', 100)] });

      // Act
      const decision = decideOffsets(event, report, settings.reportBatchItemFailures);

      // Assess: nothing committed at or past a failed offset, and both partitions redelivered from it
      expect(decision.outcome).not.toBe('success');
      expect(decision.commit).toEqual([]);
      expect(decision.redeliver).toEqual([
        { topic: 'reviews', partition: 0, offset: '10' },
        { topic: 'reviews', partition: 1, offset: '100' },
      ]);
    },
  );

  it('covers all 18 combinations', () => {
    expect(combinations).toHaveLength(18);
  });
});
