/**
 * kafkajs as this project needs it, in one call: {@link installKafkajsWorkarounds}, made by every
 * program before it creates a kafkajs client (kafka/connection.ts does it for the host and
 * the CLI). The host also runs {@link verifyKafkajsWorkarounds} before it consumes: it does not
 * start on a kafkajs other than the pinned one, nor on one that would lose record headers. The
 * fetch probe (./fetch-probe.ts) is the host consumer's own: each pipeline's consumer installs it.
 *
 * kafkajs is pinned (package.json, ./version.ts) because this folder relies on these of its
 * internals, as node-postgres users rely on pg-pool's. For each: what it is, what breaks if it
 * changes, and what catches that.
 *
 * - `kafkajs/src/protocol/recordBatch/record/v0/decoder.js`, the record decoder: its export,
 *   `(decoder, batchContext) => record`, is replaced in Node's module cache (./wire-records.ts);
 *   it must read a record's header list with `decoder.readVarIntArray(HeaderDecoder)` and take
 *   `batchContext.timestampType`. If not: records lose their headers or their order. Caught by
 *   the start-up self-check (./self-check.ts: the host refuses to start), test/unit/kafka/kafkajs/wire-records.test.ts
 *   and test/unit/kafka/kafkajs/index.test.ts.
 * - `kafkajs/src/protocol/decoder.js`, `Decoder.prototype.readVarIntArray`: overridden on each
 *   record's own Decoder instance to catch the header list. Same breakage, same checks.
 * - The record decoder's output and inputs, as ./record-decoder.ts reproduces them for
 *   well-formed records: a Decoder's `buffer` (a Buffer) and `offset`, the batch context's
 *   `firstOffset`, `firstTimestamp`, `maxTimestamp` (int64 strings), `timestampType`,
 *   `magicByte`, `isControlBatch`, and the record's fields in kafkajs' order. If they change:
 *   records differ from what kafkajs would have given. Caught by
 *   test/unit/kafka/kafkajs/record-decoder.test.ts (the two decoders on the same bytes) and the
 *   self-check (a header-order probe through the installed decoder).
 * - `kafkajs/src/protocol/recordBatch/header/v0/decoder.js`: the reader passed to
 *   `readVarIntArray` for headers, recognised by identity. Same breakage, same checks.
 * - `kafkajs/src/protocol/recordBatch/v0/decoder.js`, the record batch decoder: captures the
 *   record decoder when it loads (its cache entry is dropped so it reloads with the wrapper),
 *   and its export is wrapped by ./fetch-probe.ts to read a failing batch's header (base offset,
 *   last offset delta at byte 23); a partial batch must fail as `KafkaJSPartialMessageError`. If
 *   not: no headers (caught as above), or an unreadable batch is reported without its offsets
 *   (test/unit/kafka/kafkajs/fetch-probe.test.ts, test/integration/codecs.test.ts).
 * - `kafkajs/src/protocol/requests/fetch/v4/decodeMessages.js`, the partition decoder (Fetch v4
 *   to v11): captures the batch decoder; its export is wrapped by ./fetch-probe.ts, whose n-th
 *   call must be the n-th partition of the request. If not: a wrong or no partition in the
 *   unreadable-batch line (test/integration/codecs.test.ts).
 * - `kafkajs/src/protocol/requests/fetch/index.js`, `protocol({ version })(args)` returning
 *   `{ response: { decode, parse } }`, and the Fetch response modules `requests/fetch/v<n>/response.js`
 *   (their cache entries are dropped): ./fetch-probe.ts wraps the builder to learn of completed fetches
 *   and the request's partitions. If not: the progress record never sees a completed fetch (the
 *   host reports its pipelines stalled: test/integration/host-progress.test.ts) or the
 *   unreadable-batch line loses its location (test/integration/codecs.test.ts).
 * - kafkajs' retrier wrapping a not retriable error as `KafkaJSNonRetriableError(e, { cause: e.cause || e })`
 *   and reading an error's `retriable`: ./codecs.ts and ./fetch-probe.ts throw not retriable
 *   errors whose located cause must survive (test/unit/kafka/kafkajs/fetch-probe.test.ts).
 * - `CompressionCodecs` and `CompressionTypes` (exported, the documented way to add codecs), a
 *   codec being `() => ({ compress(encoder), decompress(buffer) })`: ./codecs.ts fills the table.
 *   If not: snappy, lz4 or zstd batches stop the host (test/unit/kafka/kafkajs/codecs.test.ts,
 *   test/integration/codecs.test.ts).
 * - `kafkajs/src/network/requestQueue` (`scheduleCheckPendingRequests`) arming a timer with a
 *   negative delay, which Node 24 reports as `TimeoutNegativeWarning`: ./warnings.ts drops
 *   warnings of that name. If kafkajs stops doing it the filter is idle; no test.
 * - `kafkajs/src/consumer/consumerGroup.js`, `ConsumerGroup.prototype.joinAndSync` and `.leave`
 *   (every join, the first included, and the leave of a stop) and the instance's `seekOffset`, a
 *   Map (`seekOffsets.js`) of the seeks its next fetch applies: ./group-gate.ts runs both steps
 *   inside the host's gate and clears the Map at every gated join. If the methods go, the host
 *   refuses to start naming them; if a step is no longer called through them, a member's writes
 *   overlap the next owner's (test/integration/host-rebalance-drain.test.ts); if the seeks move
 *   elsewhere, a committed offset can move back at a rebalance (test/unit/kafka/kafkajs/group-gate.test.ts
 *   reads kafkajs' own `seek()` and `joinAndSync()`).
 * - The same class's `heartbeat({ interval })`, which must go through its private shared heartbeat
 *   (one request for concurrent calls) and send when `memberId` is set and
 *   `Date.now() >= this.lastRequest + interval`, setting `lastRequest` after the answer:
 *   ./heartbeat-clock.ts decides on `performance.now()` instead and sets `lastRequest` to
 *   -Infinity before a due heartbeat. If the method goes, the host refuses to start naming it; if
 *   the rule changes, a backward wall-clock step silences the heartbeats and the member is
 *   dropped (test/unit/kafka/kafkajs/heartbeat-clock.test.ts on kafkajs' own ConsumerGroup,
 *   test/integration/host-clock-step.test.ts).
 * - For topic ids (./topic-ids.ts): the client's own property keyed by the symbol
 *   `private:Kafka:createCluster` (`({ allowAutoTopicCreation }) => Cluster`), the cluster's
 *   `connect()`, `disconnect()` and `brokerPool.seedBroker`, a broker's `versions` (by API key) and
 *   `connectionPool.send({ request: { apiKey, apiVersion, apiName, encode }, response: { decode, parse } })`,
 *   which writes request header v1 and hands `decode` the bytes after the correlation id; and
 *   `kafkajs/src/protocol/encoder.js` (`writeBuffer`). If they change: the host cannot read topic
 *   ids; a missing factory is logged once and a deleted and re-created topic is no longer noticed.
 *   Caught by test/integration/host-recreated-topic.test.ts (a re-created topic gets a new id).
 * - For reading partitions without a group (./partition-fetcher.ts, `reconcile`): the same private
 *   cluster factory, the cluster's `addTargetTopic`, `refreshMetadata`, `findLeaderForPartitions` and
 *   `findBroker`, a broker's `fetch({ isolationLevel, maxWaitTime, minBytes, maxBytes, topics })`
 *   answering `{ responses: [{ topicName, partitions: [{ partition, highWatermark, messages }] }] }`
 *   with each message's `batchContext` (`firstOffset`, `lastOffsetDelta`), and the consumer's batch
 *   (`kafkajs/src/consumer/batch.js`, `new Batch(topic, fetchedOffset, partitionData).messages`). If
 *   they change: `reconcile` fails with kafkajs' error. Caught by test/integration/cli-reconcile.test.ts.
 * - For the self-check itself: `kafkajs/src/protocol/encoder.js`, `recordBatch/header/v0/index.js`
 *   and `recordBatch/v0/index.js` (`RecordBatch`) write the probe batch; `kafkajs/package.json`
 *   gives the installed version. If they move, the host refuses to start naming them.
 */
import { registerKafkaCodecs } from './codecs.js';
import { installHeartbeatClock } from './heartbeat-clock.js';
import { checkWireHeaders } from './self-check.js';
import { checkKafkajsVersion } from './version.js';
import { dropKafkajsTimeoutWarnings } from './warnings.js';
import { installWireRecords } from './wire-records.js';

let installed = false;

/**
 * Installs every kafkajs workaround in this process: the codecs (./codecs.ts), the wire-record
 * wrapper (./wire-records.ts), the timeout warning filter (./warnings.ts) and the heartbeat on a
 * monotonic clock (./heartbeat-clock.ts). Idempotent, and in any order with kafkajs' own loading
 * (see ./wire-records.ts). Throws a `KafkajsIncompatibleError` when kafkajs' record decoder or
 * its consumer group's heartbeat is not where or what it expects.
 */
export function installKafkajsWorkarounds(): void {
  if (installed) return;
  registerKafkaCodecs();
  installWireRecords();
  dropKafkajsTimeoutWarnings();
  installHeartbeatClock();
  installed = true;
}

/**
 * The host's check before it consumes: the installed kafkajs is the pinned one, the workarounds
 * are installed, and a record's headers come back in wire order (./self-check.ts). Rejects with
 * a `KafkajsIncompatibleError` naming kafkajs and its version(s) otherwise.
 */
export async function verifyKafkajsWorkarounds(): Promise<void> {
  checkKafkajsVersion();
  installKafkajsWorkarounds();
  await checkWireHeaders();
}
