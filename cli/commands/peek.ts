/**
 * `storage-consumer peek`: a few records of a pipeline's topic, read over the host's Kafka
 * connection by a throw-away consumer group, each with what the pipeline's contract makes of it.
 * Stores nothing and commits no offset.
 */
import { createKafkaClient } from '../../kafka/clients.js';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { buildKafkaEvent } from '../../shared/kafka-event-builder.js';
import { parseKafkaEvent } from '../../shared/kafka-event.js';
import { PIPELINE_NAMES, PIPELINES } from '../../shared/pipelines.js';
import type { KafkaRecord } from '../../shared/records.js';
import { defineCommand, EXIT, jsonOption, RefusedError, UsageError } from '../command.js';
import { renderJson } from '../output.js';
import { parsePipeline } from './pipeline-option.js';

const WHOLE_NUMBER = /^\d+$/;
const DEFAULT_COUNT = 1;
const MAX_COUNT = 100;
/** How long peek waits for the records before it gives up (and prints what it read). */
const READ_TIMEOUT_MS = 30_000;
/** Without --full, a key, header or value longer than this is cut, with its full length said. */
const SHOWN_CHARACTERS = 2_000;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as text when they are UTF-8, else as hex: `{encoding, text}`. */
function bytesView(bytes: Buffer | null): { encoding: 'utf8' | 'hex'; text: string } | null {
  if (bytes === null) return null;
  try {
    return { encoding: 'utf8', text: utf8.decode(bytes) };
  } catch {
    return { encoding: 'hex', text: bytes.toString('hex') };
  }
}

/** What peek reports of one record: as the host hands it to the pipeline, and the contract's verdict. */
function inspect(pipeline: keyof typeof PIPELINES, record: KafkaRecord) {
  const verdict = record.rejection
    ? { ok: false as const, rejection: record.rejection }
    : (PIPELINES[pipeline].decode(record.value) as { ok: true; message: unknown } | { ok: false; rejection: KafkaRecord['rejection'] });
  return {
    topic: record.topic,
    partition: record.partition,
    offset: String(record.offset),
    timestamp: record.timestamp === null ? null : new Date(record.timestamp).toISOString(),
    timestampType: record.timestampType,
    key: bytesView(record.key),
    headers: record.headers.map((header) => ({ name: header.name, value: bytesView(header.value) })),
    valueBytes: record.value?.length ?? null,
    value: bytesView(record.value),
    contract: verdict.ok
      ? { verdict: 'stored', fields: verdict.message }
      : {
          verdict: 'dead-lettered',
          reason: verdict.rejection?.reason,
          detail: verdict.rejection?.detail,
          violations: verdict.rejection?.violations,
        },
  };
}

/** A text cut to `limit` characters, saying how much was left out and how to see it. */
function cut(text: string, limit: number): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)} ... (${text.length - limit} more characters; --full shows all)`;
}

function renderRecord(view: ReturnType<typeof inspect>, full: boolean): string {
  const limit = full ? Number.POSITIVE_INFINITY : SHOWN_CHARACTERS;
  const show = (bytes: ReturnType<typeof bytesView>) =>
    bytes === null ? '(null)' : bytes.encoding === 'hex' ? `hex ${cut(bytes.text, limit)}` : cut(bytes.text, limit);
  const lines = [
    `${view.topic}-${view.partition}@${view.offset}`,
    `  timestamp  ${view.timestamp ?? '-'} (${view.timestampType ?? '-'})`,
    `  key        ${show(view.key)}`,
    `  headers    ${view.headers.length === 0 ? '(none)' : ''}`,
    ...view.headers.map((header, index) => `    ${index + 1}. ${header.name} = ${show(header.value)}`),
    `  value      ${view.valueBytes === null ? '(null)' : `${view.valueBytes} bytes`}`,
    `    ${show(view.value)}`,
  ];
  if (view.contract.verdict === 'stored') {
    lines.push('  contract   valid: the pipeline would store (if its package_name is registered) these fields:');
    lines.push(
      ...JSON.stringify(view.contract.fields, null, 2)
        .split('\n')
        .map((line) => `    ${cut(line, limit)}`),
    );
  } else {
    lines.push(`  contract   dead letter: reason ${view.contract.reason}, detail: ${view.contract.detail}`);
    for (const violation of view.contract.violations?.kept ?? []) lines.push(`    - ${violation}`);
    const more = (view.contract.violations?.total ?? 0) - (view.contract.violations?.kept.length ?? 0);
    if (more > 0) lines.push(`    (+${more} more violation(s) not kept)`);
  }
  return `${lines.join('\n')}\n`;
}

/** `peek <pipeline> --partition N --offset X [--count K]`: read records, store nothing. */
export const peek = defineCommand({
  name: 'peek',
  summary: "read records of a pipeline's topic over the host's Kafka connection and show the contract's verdict; stores nothing",
  usage: ['<pipeline> --partition <N> --offset <X> [--count <K>] [--full] [--json]'],
  description: `Reads K records (default ${DEFAULT_COUNT}, at most ${MAX_COUNT}) of the pipeline's topic from offset X of partition N, over
the same Kafka connection as the host (KAFKA_BROKERS, TLS, SASL PLAIN/SCRAM, MSK IAM), and prints
for each: its key, its headers in wire order, its timestamp, its value (as text, or as hex when
it is not UTF-8) and what the pipeline's contract makes of it: the decoded fields, or the
dead-letter reason and detail (with every violation) it would get. Whether the package is
registered is not checked (no database is used). Nothing is stored, no offset is committed, and
no consumer group of the service is touched (a throw-away group reads, then is deleted).
Offsets without a record (transaction markers, compacted records) are passed over: peek shows
the records from X up to the end of the partition, at most K. A key, header, value or field
longer than ${SHOWN_CHARACTERS} characters is cut, with its length said (--json never cuts).
Exit 1 when the partition or offset does not exist.`,
  arguments: [{ name: 'pipeline', help: PIPELINE_NAMES.join(', ') }],
  options: {
    partition: { type: 'string', value: 'N', help: 'the partition (required)' },
    offset: { type: 'string', value: 'X', help: 'the first offset to read (required)' },
    count: { type: 'string', value: 'K', help: `how many records (default ${DEFAULT_COUNT}, at most ${MAX_COUNT})` },
    full: { type: 'boolean', help: 'every value in full, however long' },
    ...jsonOption('the records as JSON'),
  },
  async run({ values, positionals }, io) {
    const name = parsePipeline(positionals[0], '<pipeline>');
    if (name === undefined) throw new UsageError('<pipeline> is required');
    const { partition: partitionText, offset: offsetText, count: countText = String(DEFAULT_COUNT) } = values;
    if (partitionText === undefined || !WHOLE_NUMBER.test(partitionText))
      throw new UsageError('--partition N is required (a partition number)');
    if (offsetText === undefined || !WHOLE_NUMBER.test(offsetText)) throw new UsageError('--offset X is required (an offset)');
    if (!WHOLE_NUMBER.test(countText) || Number(countText) < 1 || Number(countText) > MAX_COUNT) {
      throw new UsageError(`--count must be 1 to ${MAX_COUNT}, got ${JSON.stringify(countText)}`);
    }
    const partition = Number(partitionText);
    const offset = BigInt(offsetText);
    const host = loadHostSettings(io.env);
    const { topic } = host.storage.pipelines[name];
    const kafka = createKafkaClient(host.kafka, { clientId: `${host.kafka.clientId}-peek`, retries: 3 });
    const admin = kafka.admin();
    await admin.connect();
    let records: SourceRecord[];
    let note: string | undefined;
    try {
      const ends = await admin.partitionOffsets(topic);
      const range = ends.find((candidate) => candidate.partition === partition);
      if (range === undefined)
        throw new RefusedError(`topic ${topic} has no partition ${partition} (partitions ${ends.map((end) => end.partition).join(', ')})`);
      const start = BigInt(range.low);
      const end = BigInt(range.high);
      if (offset < start || offset >= end) {
        throw new RefusedError(
          `partition ${partition} of ${topic} holds offsets ${start} to ${end - 1n}${end === start ? ' (it is empty)' : ''}: there is ` +
            `no record at offset ${offset}`,
        );
      }
      const wanted = Number(BigInt(Math.min(Number(countText), Number(end - offset))));
      const read = await kafka.partitionReader().read({ topic, partition, offset, count: wanted, end, timeoutMs: READ_TIMEOUT_MS });
      records = read.records;
      // When the records stop coming, what was read is shown with a note, never dropped.
      if (!read.complete) {
        if (records.length === 0) throw new RefusedError(`no records arrived within ${READ_TIMEOUT_MS / 1000} s`);
        note = `${records.length} of ${wanted} record(s) arrived within ${READ_TIMEOUT_MS / 1000} s; showing those`;
      }
    } finally {
      await admin.disconnect();
    }
    const event = buildKafkaEvent(records);
    const views = parseKafkaEvent(event).map((record) => inspect(name, record));
    if (values.json === true) io.stdout(renderJson({ pipeline: name, topic, partition, records: views }));
    else io.stdout(views.map((view) => renderRecord(view, values.full === true)).join('\n'));
    if (note !== undefined) io.stderr(`storage-consumer peek: ${note}\n`);
    if (views.length === 0)
      io.stderr(`storage-consumer peek: no records from offset ${offset} to the end of partition ${partition} of ${topic}\n`);
    return EXIT.ok;
  },
});
