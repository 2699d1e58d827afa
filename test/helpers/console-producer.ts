/**
 * Kafka's own Java console producer (`kafka.tools.ConsoleProducer`, from the broker
 * distribution the test run already resolved): a real Java client writing real compressed
 * batches and headers, for what kafkajs cannot produce itself.
 *
 * The JVM never outlives the test: its input is a pipe from this process, so it reaches end of
 * input and exits when this process dies, however it dies; a run that outlasts its timeout is
 * killed; `killConsoleProducers` kills whatever is left (for `afterAll`).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { resolveKafka } from '../../dev/kafka/broker.js';
import { killChildProcesses } from './host.js';
import { testBrokers } from './kafka.js';

/** One record: optional headers (`null` value: a null header), then the value line. */
export interface ConsoleRecord {
  readonly headers?: ReadonlyArray<readonly [string, string | null]>;
  readonly value: string;
}

/** What the console producer is told. */
export interface ConsoleProduceOptions {
  readonly topic: string;
  /** `none`, `gzip`, `snappy`, `lz4` or `zstd` (`--compression-codec`). */
  readonly codec: string;
  readonly records: readonly ConsoleRecord[];
  readonly timeoutMs?: number;
}

// Separators no test value contains: the producer splits each input line on them.
const HEADERS_END = '\u0001';
const HEADER_SEPARATOR = '\u0002';
const NAME_END = '\u0003';
const NULL_MARKER = '<null>';

const running = new Set<ChildProcess>();

/** Writes `records` to `topic`, in order, in batches compressed with `codec`; resolves once the JVM exited 0. */
export async function consoleProduce(options: ConsoleProduceOptions): Promise<void> {
  const { classpath } = await resolveKafka();
  // The producer parses headers on every line or on none, and refuses an empty header list.
  const withHeaders = options.records.filter((record) => (record.headers ?? []).length > 0).length;
  if (withHeaders > 0 && withHeaders < options.records.length) throw new Error('give headers to every record of a run, or to none');
  const input = options.records
    .map((record) => {
      const headers = (record.headers ?? []).map(([name, value]) => `${name}${NAME_END}${value ?? NULL_MARKER}`).join(HEADER_SEPARATOR);
      return withHeaders > 0 ? `${headers}${HEADERS_END}${record.value}\n` : `${record.value}\n`;
    })
    .join('');
  const headerParsing =
    withHeaders > 0
      ? [
          'parse.headers=true',
          `headers.delimiter=${HEADERS_END}`,
          `headers.separator=${HEADER_SEPARATOR}`,
          `headers.key.separator=${NAME_END}`,
          `null.marker=${NULL_MARKER}`,
        ]
      : [];
  const child = spawn(
    'java',
    [
      '-Xmx96m',
      '-cp',
      classpath,
      'kafka.tools.ConsoleProducer',
      '--bootstrap-server',
      testBrokers().join(','),
      '--topic',
      options.topic,
      '--compression-codec',
      options.codec,
      // All records of one run go out together: one compressed batch per partition.
      '--batch-size',
      String(1024 * 1024),
      '--timeout',
      '200',
      '--request-required-acks',
      'all',
      ...headerParsing.flatMap((property) => ['--property', property]),
    ],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  running.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const timeoutMs = options.timeoutMs ?? 90_000;
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  child.stdin?.end(input, 'utf8');
  try {
    const { code, signal } = await exited;
    if (code !== 0) {
      throw new Error(
        `ConsoleProducer (${options.codec}) to ${options.topic} exited ${code ?? signal}${signal === 'SIGKILL' ? ` after ${timeoutMs} ms` : ''}:\n${stderr}`,
      );
    }
  } finally {
    clearTimeout(timer);
    running.delete(child);
  }
}

/** Kills every console producer still running; for `afterAll`. */
export async function killConsoleProducers(): Promise<void> {
  await killChildProcesses(running);
}
