/**
 * `storage-consumer dlq show <id>`: one dead letter whole, its key and payload as text when they
 * are UTF-8, else as hex (docs/operations.md, "Dead letters").
 */
import { defineCommand, EXIT, jsonOption, RefusedError, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import type { StoredDeadLetter } from '../dead-letter-store.js';
import { findDeadLetter, isTruncated } from '../dead-letter-store.js';
import { renderJson } from '../output.js';
import { instantText } from '../time.js';

/** Bytes as an operator can read them: the text when they are valid UTF-8, else hex. */
function readableBytes(bytes: Buffer | null): { encoding: 'utf8' | 'hex'; text: string } | null {
  if (bytes === null) return null;
  try {
    return { encoding: 'utf8', text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    return { encoding: 'hex', text: bytes.toString('hex') };
  }
}

function describe(letter: StoredDeadLetter) {
  return {
    id: letter.id,
    pipeline: letter.pipeline,
    topic: letter.topic,
    partition: letter.partition,
    offset: letter.offset,
    kafkaTimestamp: letter.kafkaTimestamp,
    key: readableBytes(letter.key),
    reason: letter.reason,
    detail: letter.detail,
    payloadSize: letter.payloadSize,
    storedSize: letter.storedSize,
    truncated: isTruncated(letter),
    payloadSha256: letter.payloadSha256.toString('hex'),
    headers: letter.headers,
    createdAt: letter.createdAt,
    redrivenAt: letter.redrivenAt,
    violations: letter.violations,
    payload: readableBytes(letter.payload),
  };
}

/** `dlq show <id>`: one dead letter, whole. */
export const dlqShow = defineCommand({
  name: 'show',
  summary: 'show one dead letter: coordinates, reason, detail, payload',
  description: `Shows one dead letter: its Kafka coordinates, key, headers, reason and detail (with every
contract violation when there were several: the first 20 and the total), when it was stored
and re-driven, and its payload, as text when it is valid UTF-8, else as hex, with the original
size (a truncated payload says so: it cannot be re-driven). Exit 1 when there is no such id.`,
  arguments: [{ name: 'id', help: "the dead letter's numeric id (dlq list shows it)" }],
  options: jsonOption(),
  async run({ values, positionals }, io) {
    const id = positionals[0] ?? '';
    if (!/^\d{1,18}$/.test(id)) throw new UsageError(`<id> must be a dead letter's numeric id, got ${JSON.stringify(id)}`);
    const letter = await withDatabase(io, ({ pool }) => findDeadLetter(pool, id));
    if (letter === undefined) throw new RefusedError(`no dead letter with id ${id}`);
    const shown = describe(letter);
    if (values.json === true) {
      io.stdout(renderJson(shown));
      return EXIT.ok;
    }
    const size = shown.truncated
      ? `${shown.payloadSize} bytes, truncated to ${shown.storedSize}: cannot be re-driven`
      : `${shown.payloadSize} bytes`;
    const lines: Array<[string, string]> = [
      ['id', shown.id],
      ['pipeline', shown.pipeline],
      ['coordinates', `${shown.topic}-${shown.partition}@${shown.offset}`],
      ['kafka timestamp', instantText(shown.kafkaTimestamp)],
      ['key', shown.key === null ? '-' : `${shown.key.text}${shown.key.encoding === 'hex' ? ' (hex)' : ''}`],
      ['headers', shown.headers.length === 0 ? '-' : JSON.stringify(shown.headers)],
      ['reason', shown.reason],
      ['detail', shown.detail],
      ['stored', shown.createdAt.toISOString()],
      ['redriven', shown.redrivenAt?.toISOString() ?? '-'],
      ['payload size', size],
      ['payload sha256', shown.payloadSha256],
    ];
    const width = Math.max(...lines.map(([label]) => label.length));
    io.stdout(lines.map(([label, value]) => `${`${label}:`.padEnd(width + 2)}${value}\n`).join(''));
    if (shown.violations !== null) {
      const { total, kept } = shown.violations;
      const which = kept.length < total ? `, the first ${kept.length} kept` : '';
      io.stdout(`violations (${total}${which}):\n${kept.map((violation) => `  - ${violation}\n`).join('')}`);
    }
    const payload = shown.payload;
    io.stdout(
      payload === null
        ? 'payload: (null)\n'
        : `payload (${payload.encoding === 'utf8' ? 'UTF-8 text' : 'hex: not valid UTF-8'}):\n${payload.text}\n`,
    );
    return EXIT.ok;
  },
});
