/**
 * `npm run chaos [-- --messages N --kills K --seed S --keep --reconcile]`: one chaos run at the given size
 * (default 100,000 messages, 10 host kills, one PostgreSQL restart, one broker restart, a second
 * host joining and leaving). Prints progress, the report (with --reconcile, what `storage-consumer
 * reconcile` printed after the run, as text and JSON), and as its last line one JSON object.
 * Exits 0 only when nothing was lost, duplicated or wrong and the dead letters match. The hosts and
 * reconcile run on the Kafka client `KAFKA_CLIENT` names (kafkajs when unset): `KAFKA_CLIENT=platformatic npm run chaos`.
 */
import { parseArgs } from 'node:util';
import { runChaos } from './harness.js';
import { reportLines } from './report.js';

function positiveInteger(name: string, text: string | undefined, fallback: number, min = 0): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) {
    console.error(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return value;
}

const { values } = parseArgs({
  options: {
    messages: { type: 'string' },
    kills: { type: 'string' },
    seed: { type: 'string' },
    'postgres-restarts': { type: 'string' },
    'broker-restarts': { type: 'string' },
    'no-second-host': { type: 'boolean' },
    reconcile: { type: 'boolean' },
    keep: { type: 'boolean' },
  },
  strict: true,
});

const seed = positiveInteger('seed', values.seed, Math.floor(Math.random() * 2 ** 31));
const options = {
  messages: positiveInteger('messages', values.messages, 100_000, 1),
  kills: positiveInteger('kills', values.kills, 10),
  postgresRestarts: positiveInteger('postgres-restarts', values['postgres-restarts'], 1),
  brokerRestarts: positiveInteger('broker-restarts', values['broker-restarts'], 1),
  secondHost: values['no-second-host'] !== true,
  keep: values.keep === true,
  reconcile: values.reconcile === true,
  seed,
};

let code: number;
try {
  const result = await runChaos(options);
  for (const line of reportLines(result)) console.log(line);
  console.log(JSON.stringify(result.summary));
  code = result.summary.passed ? 0 : 1;
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  console.log(
    JSON.stringify({
      messages: options.messages,
      faults: null,
      lost: null,
      duplicated: null,
      wrong: null,
      dlq_expected: null,
      dlq_found: null,
      seed,
      elapsed_s: null,
      error: String(error),
    }),
  );
  code = 2;
}
process.exit(code);
