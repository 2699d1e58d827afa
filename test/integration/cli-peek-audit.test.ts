import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import { closeHostTestStack, createTestPipelines, hostEnvironment, openHostTestStack, waitUntil } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

let stack: HostTestStack;
let admin: Admin;
let names: PipelineNames;
let env: Record<string, string>;

beforeAll(async () => {
  stack = await openHostTestStack('cli-peek');
  admin = stack.admin;
  names = await createTestPipelines('cli-peek');
  env = hostEnvironment({ databaseUrl: stack.schema.url, names });
});

afterAll(() => closeHostTestStack(stack, []));

interface PeekJson {
  records: Array<{
    offset: string;
    key: { encoding: string; text: string } | null;
    headers: Array<{ name: string; value: { encoding: string; text: string } | null }>;
    value: { encoding: string; text: string } | null;
    contract: {
      verdict: string;
      reason?: string;
      detail?: string;
      fields?: Record<string, unknown>;
      violations?: { total: number; kept: string[] };
    };
  }>;
}

describe('peek', () => {
  it('reads records with headers in wire order, shows text or hex, and the contract verdict; stores nothing, commits nothing', async () => {
    // Prepare: a valid review with interleaved duplicate headers, then bytes that are not UTF-8,
    // then a message that breaks two rules of the contract
    await produce(names.topics.reviews, [
      {
        partition: 1,
        key: 'gp:peek-1',
        value: JSON.stringify({ ...sampleReview(), review_id: 'gp:peek-1' }),
        headers: { trace: ['t1', 't3'], other: 'o2' },
      },
      { partition: 1, key: null, value: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) },
      { partition: 1, key: null, value: JSON.stringify({ review_id: 'gp:peek-3' }) },
    ]);
    const groupsBefore = (await admin.listGroups()).groups.map((group) => group.groupId).sort();

    // Act
    const json = await runCli(['peek', 'reviews', '--partition', '1', '--offset', '0', '--count', '3', '--json'], env);
    const text = await runCli(['peek', 'reviews', '--partition', '1', '--offset', '1'], env);
    const outside = await runCli(['peek', 'reviews', '--partition', '1', '--offset', '3'], env);

    // Assess
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const [valid, binary, invalid] = (JSON.parse(json.stdout) as PeekJson).records;
    expect(valid?.key).toEqual({ encoding: 'utf8', text: 'gp:peek-1' });
    expect(valid?.headers.map((header) => header.name)).toEqual(['trace', 'trace', 'other']);
    expect(valid?.contract).toMatchObject({ verdict: 'stored', fields: { review_id: 'gp:peek-1', score: 3 } });
    expect(binary?.value).toEqual({ encoding: 'hex', text: '7bfffe7d' });
    expect(binary?.contract).toMatchObject({ verdict: 'dead-lettered', reason: 'invalid_encoding' });
    expect(invalid?.contract).toMatchObject({
      verdict: 'dead-lettered',
      reason: 'invalid_message',
      detail: expect.stringMatching(/\(\+\d+ more\)$/),
    });
    expect(invalid?.contract.violations?.kept.length).toBe(invalid?.contract.violations?.total);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`${names.topics.reviews}-1@1`);
    expect(text.stdout).toContain('hex 7bfffe7d');
    expect(text.stdout).toContain('dead letter: reason invalid_encoding');
    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain('there is no record at offset 3');
    expect(await stack.schema.pool.query('SELECT 1 FROM reviews').then((result) => result.rowCount)).toBe(0);
    expect(await stack.schema.pool.query('SELECT 1 FROM dead_letter_events').then((result) => result.rowCount)).toBe(0);
    expect(
      (await admin.fetchOffsets({ groupId: names.groups.reviews, topics: [names.topics.reviews] }))[0]?.partitions.every(
        (p) => p.offset === '-1',
      ),
    ).toBe(true);
    expect((await admin.listGroups()).groups.map((group) => group.groupId).filter((id) => id.startsWith('storage-consumer-peek-'))).toEqual(
      groupsBefore.filter((id) => id.startsWith('storage-consumer-peek-')),
    );
  });

  it('passes over transaction markers: the records up to the end, at once, none dropped', async () => {
    // Prepare: two committed transactions on partition 2: records 0-1, marker 2, record 3, marker 4
    const producer = testKafka('cli-peek-tx').producer({
      transactionalId: `cli-peek-${Date.now()}`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    try {
      for (const batch of [['gp:tx-1', 'gp:tx-2'], ['gp:tx-3']]) {
        const transaction = await producer.transaction();
        await transaction.send({
          topic: names.topics.reviews,
          messages: batch.map((id) => ({ partition: 2, key: id, value: JSON.stringify({ ...sampleReview(), review_id: id }) })),
        });
        await transaction.commit();
      }
    } finally {
      await producer.disconnect();
    }
    // The commit answers once the coordinator has prepared it; the markers reach the partition
    // after that, so the end of the partition is read until the second marker is there.
    let high = '';
    await waitUntil(
      'both commit markers written (partition 2 ends at offset 5)',
      async () => {
        const [range] = (await admin.fetchTopicOffsets(names.topics.reviews)).filter((offsets) => offsets.partition === 2);
        high = range?.high ?? '';
        return high === '5';
      },
      10_000,
      50,
    );
    expect(high).toBe('5');

    // Act: ask for more records than there are
    const started = Date.now();
    const json = await runCli(['peek', 'reviews', '--partition', '2', '--offset', '0', '--count', '10', '--json'], env);
    const elapsedMs = Date.now() - started;
    const fromMarker = await runCli(['peek', 'reviews', '--partition', '2', '--offset', '2', '--json'], env);

    // Assess
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as PeekJson).records.map((record) => [record.offset, record.key?.text])).toEqual([
      ['0', 'gp:tx-1'],
      ['1', 'gp:tx-2'],
      ['3', 'gp:tx-3'],
    ]);
    // Well under the 30 s read timeout: the end of the partition ends the read.
    expect(elapsedMs).toBeLessThan(15_000);
    console.log(
      `[cli-peek] 10 asked over offsets 0-4 with 2 transaction markers: offsets ${JSON.stringify(
        (JSON.parse(json.stdout) as PeekJson).records.map((record) => record.offset),
      )} in ${elapsedMs} ms`,
    );
    expect(fromMarker.code).toBe(0);
    expect((JSON.parse(fromMarker.stdout) as PeekJson).records.map((record) => record.offset)).toEqual(['3']);
  });

  it('cuts a long value unless --full', async () => {
    const long = JSON.stringify({ ...sampleReview(), review_id: 'gp:long', text: 'x'.repeat(70_000) });
    const [sent] = await produce(names.topics.reviews, [{ partition: 0, key: 'gp:long', value: long }]);
    const at = sent?.baseOffset ?? '0';

    const cut = await runCli(['peek', 'reviews', '--partition', '0', '--offset', at], env);
    const full = await runCli(['peek', 'reviews', '--partition', '0', '--offset', at, '--full'], env);

    expect(cut.code).toBe(0);
    expect(cut.stdout.length).toBeLessThan(10_000);
    expect(cut.stdout).toContain(`${long.length} bytes`);
    expect(cut.stdout).toContain(`... (${long.length - 2_000} more characters; --full shows all)`);
    expect(full.stdout).toContain(long);
    console.log(
      `[cli-peek] ${cut.stdout
        .split('\n')
        .find((line) => line.includes('more characters'))
        ?.slice(-90)}`,
    );
  });
});

describe('audit', () => {
  it('lists the entries as a table and as JSON, and filters by --since', async () => {
    // Prepare: two entries through a command that writes one (a replay), with a named actor
    const first = await runCli(['replay', 'app-stats', '--to', 'earliest', '--create-group'], { ...env, STORAGE_ACTOR: 'runbook-walker' });
    expect(first.code).toBe(0);

    // Act
    const table = await runCli(['audit'], env);
    const json = await runCli(['audit', '--json'], env);
    const future = await runCli(['audit', '--since', '2999-01-01', '--json'], env);

    // Assess
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^\s*ID\s+TIME\s+ACTOR\s+COMMAND\s+STATE\s+ARGUMENTS\s+OUTCOME$/);
    expect(table.stdout).toMatch(/runbook-walker\s+replay\s+completed\s+\{.*"pipeline":"app-stats"/);
    const { entries } = JSON.parse(json.stdout) as {
      entries: Array<{ actor: string; command: string; outcome: { partitions: unknown[] } }>;
    };
    expect(entries.at(-1)).toMatchObject({ actor: 'runbook-walker', command: 'replay' });
    expect(entries.at(-1)?.outcome.partitions).toHaveLength(3);
    expect((JSON.parse(future.stdout) as { entries: unknown[] }).entries).toEqual([]);
  });
});
