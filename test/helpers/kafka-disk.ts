/**
 * The test broker's partitions where they lie on its disk: a test that needs a record batch no
 * client can read spoils one there, as a failing disk or a broken producer would leave it.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Admin } from '@platformatic/kafka';
import { testBrokers } from './kafka.js';

/** The folder of a partition's log on the test broker, as the broker names it (DescribeLogDirs). */
async function partitionLogDir(topic: string, partition: number): Promise<string> {
  const admin = new Admin({ clientId: 'test-log-dirs', bootstrapBrokers: testBrokers() });
  try {
    const [broker] = await admin.describeLogDirs({ topics: [{ name: topic, partitions: [partition] }] });
    const dir = broker?.results.find((result) => result.topics.some((one) => one.name === topic))?.logDir;
    if (dir === undefined) throw new Error(`the broker names no log dir of ${topic}`);
    return join(dir, `${topic}-${partition}`);
  } finally {
    await admin.close();
  }
}

/**
 * Spoils the first gzip batch of a partition's first segment where it lies on the broker's disk:
 * its compressed bytes no longer start with gzip's magic number, so no client can inflate them;
 * the batch's header (offsets, length) stays intact. Returns the batch's first and last offsets.
 */
export async function spoilFirstGzipBatch(topic: string, partition: number): Promise<{ first: string; last: string }> {
  const file = await open(join(await partitionLogDir(topic, partition), '00000000000000000000.log'), 'r+');
  try {
    const { size } = await file.stat();
    const header = Buffer.alloc(61);
    for (let at = 0; at + 61 <= size;) {
      await file.read(header, 0, 61, at);
      const length = header.readInt32BE(8);
      const gzip = (header.readInt16BE(21) & 0x07) === 1;
      if (gzip) {
        await file.write(Buffer.from([0, 0]), 0, 2, at + 61);
        const first = header.readBigInt64BE(0);
        return { first: first.toString(), last: (first + BigInt(header.readInt32BE(23))).toString() };
      }
      at += 12 + length;
    }
  } finally {
    await file.close();
  }
  throw new Error(`no gzip batch in ${topic}-${partition}`);
}
