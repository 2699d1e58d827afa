import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { installKafkajsWorkarounds, verifyKafkajsWorkarounds } from '../../../../kafka/kafkajs/index.js';
import { checkWireHeaders } from '../../../../kafka/kafkajs/self-check.js';
import type { RecordBatchDecode } from '../../../../kafka/kafkajs/self-check.js';
import {
  checkKafkajsVersion,
  installedKafkajsVersion,
  KafkajsIncompatibleError,
  PINNED_KAFKAJS_VERSION,
} from '../../../../kafka/kafkajs/version.js';

const REFUSAL =
  'storage-consumer does not run on it rather than store records without their headers (kafka/kafkajs/index.ts lists the kafkajs internals it relies on)';

// kafkajs' own record batch decoder, loaded after the install as a Fetch response loads it.
installKafkajsWorkarounds();
const require = createRequire(import.meta.url);
const protocol = join(dirname(require.resolve('kafkajs')), 'src', 'protocol');
const Decoder = require(join(protocol, 'decoder.js')) as new (buffer: Buffer) => unknown;
const decodeRecordBatch = require(join(protocol, 'recordBatch', 'v0', 'decoder.js')) as (
  decoder: unknown,
) => Promise<{ records: KafkaMessage[] }>;

async function realRecords(batch: Buffer): Promise<readonly KafkaMessage[]> {
  return (await decodeRecordBatch(new Decoder(batch))).records;
}

describe('the pinned kafkajs version', () => {
  it('is the one package.json pins, and the one installed', async () => {
    // Prepare
    const manifest = JSON.parse(await readFile(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
    };

    // Act / Assess
    expect(PINNED_KAFKAJS_VERSION).toBe(manifest.dependencies.kafkajs);
    expect(installedKafkajsVersion()).toBe(PINNED_KAFKAJS_VERSION);
    expect(() => checkKafkajsVersion()).not.toThrow();
  });

  it('refuses another installed version, naming both', () => {
    // Act
    const check = () => checkKafkajsVersion('2.3.0', '2.2.4');

    // Assess
    expect(check).toThrow(KafkajsIncompatibleError);
    expect(check).toThrow(
      'kafkajs 2.3.0 is installed, but package.json pins kafkajs 2.2.4: storage-consumer relies on internals of kafkajs 2.2.4 (kafka/kafkajs/index.ts) and does not start on another version; install the pinned one (npm ci)',
    );
  });
});

describe('the start-up check of record headers (fail closed)', () => {
  it('passes on the installed kafkajs once the workarounds are installed', async () => {
    // Act / Assess
    await expect(verifyKafkajsWorkarounds()).resolves.toBeUndefined();
    await expect(checkWireHeaders(realRecords)).resolves.toBeUndefined();
  });

  it('refuses a kafkajs whose record batch decoder does not go through the wrapped record decoder', async () => {
    // Prepare: kafkajs' records without what the wrapper adds, as if its batch decoder had its own record decoding
    const unwrapped: RecordBatchDecode = async (batch) => (await realRecords(batch)).map((record) => ({ ...record }));

    // Act
    const check = checkWireHeaders(unwrapped, '2.2.4');

    // Assess
    await expect(check).rejects.toThrow(KafkajsIncompatibleError);
    await expect(check).rejects.toThrow(
      `kafkajs 2.2.4 does not hand over record headers in wire order (its record batch decoder does not decode records through kafkajs/src/protocol/recordBatch/record/v0/decoder.js, the module the wrapper replaces); ${REFUSAL}`,
    );
  });

  it('refuses a kafkajs whose record decoder no longer reads the header list through readVarIntArray', async () => {
    // Prepare: what the wrapper hands over when it never sees the header list
    const headerless: RecordBatchDecode = async (batch) =>
      (await realRecords(batch)).map((record) =>
        Object.defineProperty({ ...record }, Symbol.for('storage-consumer.kafka-wire-record'), {
          value: { headers: [], timestampType: 'CREATE_TIME' },
        }),
      );

    // Act / Assess
    await expect(checkWireHeaders(headerless, '2.2.4')).rejects.toThrow(
      `kafkajs 2.2.4 does not hand over record headers in wire order (its record decoder does not read the header list through Decoder.readVarIntArray: a record with the headers trace=1, other=2, trace=3 came back with none); ${REFUSAL}`,
    );
  });

  it('refuses a kafkajs whose headers come back regrouped, and one whose decoder throws', async () => {
    // Prepare
    const regrouped: RecordBatchDecode = async (batch) =>
      (await realRecords(batch)).map((record) =>
        Object.defineProperty({ ...record }, Symbol.for('storage-consumer.kafka-wire-record'), {
          value: {
            headers: [
              { name: 'trace', value: Buffer.from('1') },
              { name: 'trace', value: Buffer.from('3') },
              { name: 'other', value: Buffer.from('2') },
            ],
            timestampType: 'CREATE_TIME',
          },
        }),
      );
    const broken: RecordBatchDecode = async () => {
      throw new TypeError('decoder.readVarIntArray is not a function');
    };

    // Act / Assess
    await expect(checkWireHeaders(regrouped, '2.2.4')).rejects.toThrow(
      `kafkajs 2.2.4 does not hand over record headers in wire order (a record with the headers trace=1, other=2, trace=3 came back with trace=1, trace=3, other=2); ${REFUSAL}`,
    );
    await expect(checkWireHeaders(broken, '2.2.4')).rejects.toThrow(
      `kafkajs 2.2.4 does not hand over record headers in wire order (its record batch decoder fails on a batch its own encoder wrote: decoder.readVarIntArray is not a function); ${REFUSAL}`,
    );
  });
});

describe("the workarounds of kafkajs' consumer group", () => {
  it('include the heartbeat on a monotonic clock, on every kafkajs client of the process', () => {
    // Prepare
    const ConsumerGroup = require(join(dirname(require.resolve('kafkajs')), 'src', 'consumer', 'consumerGroup.js')) as {
      prototype: { heartbeat: Record<symbol, unknown> };
    };

    // Act (installed at the top of this file)
    installKafkajsWorkarounds();

    // Assess
    expect(ConsumerGroup.prototype.heartbeat[Symbol.for('storage-consumer.kafka-heartbeat-clock')]).toBe(true);
  });
});
