/**
 * One pipeline consumer's membership in its consumer group, as one explicit life cycle
 * (docs/design.md, "Group membership"): `starting` -> `joining` (every join, the first included)
 * -> `assigned` (its partitions, under one generation) -> `revoking` (a rebalance or the broker
 * dropped the member: the lanes drain) -> `joining` ... and, on a stop, `leaving` -> `stopped`.
 *
 * It knows no Kafka client: the client's adapter (host/topic-consumer.ts) only translates the
 * client's events into these calls, and the lanes, the batch loop, the commits and the progress
 * rules read it instead of guessing from a failed heartbeat. A partition is this member's to
 * write only while the membership is `assigned` with it, in the generation the batch was taken in
 * under ({@link Membership.owns}); a stop aborts {@link Membership.stopSignal} at once, which ends
 * every wait (a back-off, a join, a pause) that listens to it.
 */
import { causeChain } from '../shared/errors.js';

/** The states of a member's life cycle, in the order a healthy member goes through them. */
export const MEMBERSHIP_STATES = ['starting', 'joining', 'assigned', 'revoking', 'leaving', 'stopped'] as const;
export type MembershipState = (typeof MEMBERSHIP_STATES)[number];

/** Why a member's partitions were taken from it. */
export type RevokeCause = 'rebalance' | 'dropped' | 'crashed';

/** One change of the life cycle, as listeners get it. */
export interface MembershipChange {
  readonly from: MembershipState;
  readonly to: MembershipState;
  /** The generation after the change (bumped by every assignment). */
  readonly generation: number;
  readonly partitions: readonly number[];
  readonly cause?: RevokeCause;
}

/** A frozen view of the membership (status, tests). */
export interface MembershipSnapshot {
  readonly state: MembershipState;
  readonly generation: number;
  readonly partitions: readonly number[];
  /** Joins begun since the start, the first included. */
  readonly joins: number;
  /** The last revoke's cause, if any. */
  readonly lastRevoke: RevokeCause | undefined;
}

/** States from which a stop can no longer be undone. */
const ENDING: ReadonlySet<MembershipState> = new Set(['leaving', 'stopped']);

/** The life cycle of one pipeline consumer's group membership (see the file's comment). */
export class Membership {
  private current: MembershipState = 'starting';
  private generationNumber = 0;
  private owned: readonly number[] = [];
  private joinCount = 0;
  private lastRevoke: RevokeCause | undefined;
  private readonly stop = new AbortController();
  private readonly listeners: Array<(change: MembershipChange) => void> = [];

  /** The state now. */
  get state(): MembershipState {
    return this.current;
  }

  /** The generation of the current (or last) assignment; 0 before the first. */
  get generation(): number {
    return this.generationNumber;
  }

  /** Partitions of the current assignment; empty unless `assigned`. */
  get partitions(): readonly number[] {
    return this.current === 'assigned' ? this.owned : [];
  }

  /** Aborted once a stop was asked for: every wait of the consumer listens to it. */
  get stopSignal(): AbortSignal {
    return this.stop.signal;
  }

  /** True once a stop was asked for. */
  get stopping(): boolean {
    return this.stop.signal.aborted;
  }

  /**
   * Whether `partition` is this member's to write now: assigned to it, and, with `generation`,
   * in that generation (a batch taken in under an older one belongs to no one here).
   */
  owns(partition: number, generation?: number): boolean {
    if (this.current !== 'assigned' || this.stopping) return false;
    if (generation !== undefined && generation !== this.generationNumber) return false;
    return this.owned.includes(partition);
  }

  /** Listens to every change (the progress record, the log). */
  onChange(listener: (change: MembershipChange) => void): void {
    this.listeners.push(listener);
  }

  /**
   * A join begins (every join: the first, after a rebalance, after the broker dropped the
   * member, after a crash). What the member held is revoked first. Ignored once stopping.
   */
  joining(): void {
    if (ENDING.has(this.current)) return;
    if (this.current === 'assigned') this.revoke('rebalance');
    this.joinCount += 1;
    this.move('joining');
  }

  /** The join ended with these partitions: a new generation. */
  assigned(partitions: readonly number[]): void {
    if (ENDING.has(this.current)) return;
    this.generationNumber += 1;
    this.owned = [...partitions].sort((a, b) => a - b);
    this.move('assigned');
  }

  /**
   * The member's partitions are no longer its own until the next join: the group rebalances,
   * the broker dropped the member (an unknown member id, an illegal generation), or the
   * consumer crashed. Idempotent; nothing to revoke outside `assigned`.
   */
  revoke(cause: RevokeCause): void {
    if (this.current !== 'assigned') return;
    this.lastRevoke = cause;
    this.move('revoking', cause);
  }

  /** A stop was asked for: every wait ends now, nothing more is taken in, the member leaves. */
  leaving(): void {
    if (ENDING.has(this.current)) return;
    this.stop.abort(new Error('the host is stopping'));
    this.move('leaving');
  }

  /** The member left its group (or gave its leave up). */
  stopped(): void {
    if (this.current === 'stopped') return;
    if (!this.stopping) this.stop.abort(new Error('the host stopped'));
    this.move('stopped');
  }

  /** A frozen copy now. */
  snapshot(): MembershipSnapshot {
    return Object.freeze({
      state: this.current,
      generation: this.generationNumber,
      partitions: this.partitions,
      joins: this.joinCount,
      lastRevoke: this.lastRevoke,
    });
  }

  private move(to: MembershipState, cause?: RevokeCause): void {
    const from = this.current;
    this.current = to;
    const change: MembershipChange = { from, to, generation: this.generationNumber, partitions: this.owned, cause };
    for (const listener of this.listeners) listener(change);
  }
}

/**
 * Whether a Kafka error says this member is no longer in its group's current generation:
 * the group rebalances (`REBALANCE_IN_PROGRESS`), or the broker no longer knows the member or
 * its generation. Read from the error's `type` (kafkajs) or `code`/`apiCode` names, and from its
 * causes, so it knows no client class.
 */
export function revokeCauseOf(error: unknown): RevokeCause | undefined {
  for (const cause of causeChain(error)) {
    const type = (cause as { type?: unknown }).type;
    if (type === 'REBALANCE_IN_PROGRESS') return 'rebalance';
    if (type === 'UNKNOWN_MEMBER_ID' || type === 'ILLEGAL_GENERATION' || type === 'FENCED_INSTANCE_ID') return 'dropped';
  }
  return undefined;
}
