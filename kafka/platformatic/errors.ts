/**
 * Reading `@platformatic/kafka`'s errors: the client wraps the broker's answer in layers (a
 * `MultipleErrors` per operation and per retry, a `ResponseError` per response, a
 * `ProtocolError` per error code, its `apiId` Kafka's name for the code), so a question about
 * an error walks all of them.
 */
import { isUnknownTopic } from '../port.js';

/** An error, the errors it aggregates and their causes, depth first; at most `limit` of them. */
function errorTree(error: unknown, limit = 64): Error[] {
  const found: Error[] = [];
  const pending: unknown[] = [error];
  while (pending.length > 0 && found.length < limit) {
    const next = pending.pop();
    if (!(next instanceof Error) || found.includes(next)) continue;
    found.push(next);
    if (next.cause !== undefined) pending.push(next.cause);
    if (next instanceof AggregateError) pending.push(...(next.errors as unknown[]));
  }
  return found;
}

/** Kafka's error names (`apiId`, as `UNKNOWN_MEMBER_ID`) anywhere in `error`. */
export function protocolErrorIds(error: unknown): Set<string> {
  const ids = new Set<string>();
  for (const one of errorTree(error)) {
    const { apiId } = one as { apiId?: unknown };
    if (typeof apiId === 'string') ids.add(apiId);
  }
  return ids;
}

/**
 * Whether `error` says a topic does not exist: Kafka's UNKNOWN_TOPIC_OR_PARTITION anywhere in
 * it, or the client's own refusal of a metadata request for one (a `UserError`, "Unknown topic <name>.").
 */
export function isMissingTopic(error: unknown): boolean {
  return errorTree(error).some((one) => isUnknownTopic(one) || /^Unknown topic /.test(one.message));
}
